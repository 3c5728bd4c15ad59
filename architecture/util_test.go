package architecture

import (
	"fmt"
	"strconv"
)

func itoa(i int) string { return strconv.Itoa(i) }

func sprint(v any) string { return fmt.Sprintf("%+v", v) }

func describeLayer(l Layer) string {
	s := ""
	if l.Attention != nil {
		s += fmt.Sprintf("att%+v ", *l.Attention)
	}
	if l.MLP != nil {
		s += fmt.Sprintf("mlp%+v ", *l.MLP)
	}
	if l.Mamba != nil {
		s += fmt.Sprintf("mamba%+v ", *l.Mamba)
	}
	if l.MoE != nil {
		s += fmt.Sprintf("moe%+v ", *l.MoE)
	}
	return s
}
