package export

import "fmt"

// Validate reports an invalid option. There are no defaults: TP 0 (or 1)
// means no tensor parallelism.
func (o *Options) Validate() error {
	if o.TP < 0 {
		return fmt.Errorf("validate: tensor-parallel size %d: want >= 0 (0 or 1: none)", o.TP)
	}
	return nil
}
