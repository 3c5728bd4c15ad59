package cli

import (
	"context"
	"errors"
	"flag"
	"strings"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/workload"
)

// fileList is the one meaning of --data in every command: input files,
// repeatable (--data a.txt --data b.txt) or comma-separated (--data
// a.txt,b.txt); commands that take --data accept the files as positional
// arguments too.
type fileList []string

func (f *fileList) String() string { return strings.Join(*f, ",") }

func (f *fileList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p != "" {
			*f = append(*f, p)
		}
	}
	return nil
}

// dataFlag declares --data on fs as a fileList; what is the files' content
// (e.g. "calibration text or token-id").
func dataFlag(fs *flag.FlagSet, what string) *fileList {
	var f fileList
	fs.Var(&f, "data", what+" `files` (repeatable or comma-separated; positional arguments too)")
	return &f
}

// dataRows reads --data for one model (dataset.Rows); what the user fixes
// on the command line (an unknown parent: split, --seq-len past the
// model's positions) is a usage error.
func dataRows(ctx context.Context, data []string, o dataset.Options) (*dataset.Packed, error) {
	p, err := dataset.Rows(ctx, data, o)
	if err != nil {
		if errors.As(err, new(*parent.UnknownSplitError)) {
			return nil, Usagef("--data: %v", err)
		}
		if ce := (*workload.ContextError)(nil); errors.As(err, &ce) {
			ce.AllowFlag = allowLongFlag
			return nil, Usagef("%v", ce)
		}
		return nil, err
	}
	return p, nil
}
