package groundtruth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/autocompress/autocompress/estimate"
)

// SharedSample is the file that marks a ground-truth folder.
const SharedSample = "aiconfigurator_silicon_sample.csv"

// Load reads and prepares the measurement rows of calibrate and
// validate-estimator: the public ground truth in dir (LoadShared; "" reads
// none) and the user's measurements in the CSV file user (ReadUser; ""
// reads none). A dir without SharedSample is an error when required,
// skipped otherwise (the default folder of a checkout without the shared
// data). No usable row is an error that says why the rows were skipped.
func Load(dir string, required bool, user string) ([]*Prepared, Skipped, error) {
	var rows []Row
	skipped := Skipped{}
	if dir != "" {
		_, err := os.Stat(filepath.Join(dir, SharedSample))
		switch {
		case err == nil:
			r, sk, err := LoadShared(dir)
			if err != nil {
				return nil, nil, err
			}
			rows, skipped = r, sk
		case required || !errors.Is(err, fs.ErrNotExist):
			return nil, nil, fmt.Errorf("%s: no %s there", dir, SharedSample)
		}
	}
	if user != "" {
		f, err := os.Open(user)
		if err != nil {
			return nil, nil, err
		}
		r, err := ReadUser(f, user, skipped)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, r...)
	}
	ps := Prepare(rows, skipped)
	if len(ps) == 0 {
		return nil, nil, fmt.Errorf("no usable measurement rows (%s)", skipped)
	}
	return ps, skipped, nil
}

// Calibrate fits the coefficients of every family to rows from prior
// (FitAll), then the consumer-GPU memory-traffic factor of the families
// with published consumer rows (FitConsumer), and, with validate, records each family's held-out errors in
// them (Validate's pooled medians and 90th percentiles, with maxIter/2
// iterations per refit); a base family copied from an era ("vllm" from
// "vllm@0.19") inherits the era's errors.
func Calibrate(ctx context.Context, rows []*Prepared, prior *estimate.CoeffFile, maxIter int, validate bool) (*estimate.CoeffFile, error) {
	cf, err := FitAll(ctx, rows, prior, maxIter)
	if err != nil {
		return nil, err
	}
	if _, err := FitConsumer(cf); err != nil {
		return nil, err
	}
	if !validate {
		return cf, nil
	}
	rep, err := Validate(ctx, rows, prior, maxIter/2)
	if err != nil {
		return nil, err
	}
	for _, c := range rep.Pooled {
		co, ok := cf.Families[c.Family]
		if !ok {
			continue
		}
		switch c.Metric {
		case TTFT:
			co.ErrTTFT, co.ErrTTFTP90 = c.Median, c.P90
		case TPOT:
			co.ErrTPOT, co.ErrTPOTP90 = c.Median, c.P90
		case Throughput:
			co.ErrThroughput, co.ErrThroughputP90 = c.Median, c.P90
		}
		cf.Families[c.Family] = co
	}
	for fam, co := range cf.Families { // base families copied from an era inherit its errors
		if base, _, ok := strings.Cut(fam, "@"); ok {
			if b := cf.Families[base]; b.Rows == co.Rows && b.ErrTPOT == 0 && b.ErrThroughput == 0 {
				b.ErrTTFT, b.ErrTPOT, b.ErrThroughput = co.ErrTTFT, co.ErrTPOT, co.ErrThroughput
				b.ErrTTFTP90, b.ErrTPOTP90, b.ErrThroughputP90 = co.ErrTTFTP90, co.ErrTPOTP90, co.ErrThroughputP90
				cf.Families[base] = b
			}
		}
	}
	return cf, nil
}
