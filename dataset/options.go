package dataset

import "fmt"

// Validate reports the first invalid option. There are no defaults: the
// sequence length is the caller's (the model's training or calibration
// length).
func (o *PackOptions) Validate() error {
	switch {
	case o.SeqLen < 1:
		return fmt.Errorf("dataset: sequence length %d: want ≥ 1", o.SeqLen)
	case o.Vocab < 0:
		return fmt.Errorf("dataset: vocabulary %d: want ≥ 0 (0: not checked)", o.Vocab)
	case o.MaxRows < 0:
		return fmt.Errorf("dataset: max rows %d: want ≥ 0 (0: all)", o.MaxRows)
	}
	return nil
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	if err := o.PackOptions.Validate(); err != nil {
		return err
	}
	if o.MaxPositions < 0 {
		return fmt.Errorf("dataset: max positions %d: want ≥ 0 (0: not checked)", o.MaxPositions)
	}
	return nil
}
