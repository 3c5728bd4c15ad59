package prune

import (
	"errors"
	"fmt"
)

// Validate reports the first invalid option. There are no defaults to
// fill: an empty Format or Engine keeps the plan's, TP 0 means none.
func (o *Options) Validate() error {
	switch {
	case o.Plan == nil:
		return errors.New("prune: no plan")
	case o.Model == "":
		return errors.New("prune: no parent checkpoint directory")
	case o.Out == "":
		return errors.New("prune: no output directory")
	case o.TP < 0:
		return fmt.Errorf("prune: tensor-parallel size %d: want >= 0 (0: none)", o.TP)
	}
	return nil
}
