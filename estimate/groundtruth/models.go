package groundtruth

import (
	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/architecture/published"
)

// Describe returns the architecture of a model id found in the ground-truth
// files (published.Describe).
func Describe(id string) (*architecture.Model, bool) { return published.Describe(id) }

// DescribePublished resolves a model id as published tables and logs write
// it (published.DescribePublished).
func DescribePublished(id string) (*architecture.Model, bool) { return published.DescribePublished(id) }

// Known returns the model ids Describe accepts (published.Known).
func Known() []string { return published.Known() }

// canonical groups the rows of one model's variants (published.Canonical).
func canonical(id string) string { return published.Canonical(id) }
