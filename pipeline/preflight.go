package pipeline

import (
	"context"
	"errors"
	"strings"

	"github.com/autocompress/autocompress/search"
)

// searchRequest is the search stage's request for c, without what the
// earlier stages and the stage's own data give (importance scores, the
// proxy's rows, the top-k's training rows) and without progress.
func (t *target) searchRequest(c *Config) search.Request {
	req := search.Request{Parent: t.arch, Name: c.Model, Dir: t.parent, GPU: t.gpu, Engine: t.engine,
		ServeOn: t.serveOn, Workload: t.workload, Budgets: t.budgets, TP: max(c.Deployment.TP, 1),
		KeepLayers: c.Search.KeepLayers, Strategy: c.Search.Strategy, TopK: c.Search.TopK, Margin: t.margin}
	if c.Deployment.Precision != "" {
		req.Precisions = strings.Split(c.Deployment.Precision, ",")
	}
	return req
}

// checkBudgets is the search stage's Check: the estimator-only search of
// the same space under the same budgets and margins (the structural prior
// in place of the importance scores, which rank candidates but do not price
// them), so that budgets no child can meet are refused in a fraction of a
// second, before importance runs. Only a budget out of reach on its own (or
// no candidate that fits at all) is refused here: whether budgets that are
// each reachable can be met together is the search's to find.
func checkBudgets(ctx context.Context, req search.Request) error {
	_, err := search.Execute(ctx, req)
	var ie *search.InfeasibleError
	if errors.As(err, &ie) && (ie.Unfit != "" || ie.Limit != "together") {
		return err
	}
	return nil
}
