package estimate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/autocompress/autocompress/hardware"
)

// Band is an estimate's error band with what it is about: the held-out
// errors of the fit, where and when its rows were measured, and whether
// that is the device being priced. A band measured on one host (or GPU)
// says nothing about another: Applies says so, and Why in words.
type Band struct {
	Family string `json:"family"`
	// Held-out median and 90th-percentile absolute percentage errors
	// (fractions); 0 = not recorded.
	TTFT          float64 `json:"ttft_median_ape"`
	TPOT          float64 `json:"tpot_median_ape"`
	Throughput    float64 `json:"throughput_median_ape"`
	TTFTP90       float64 `json:"ttft_p90_ape"`
	TPOTP90       float64 `json:"tpot_p90_ape"`
	ThroughputP90 float64 `json:"throughput_p90_ape"`
	// Fitted is false when the family has no held-out figures (priors only).
	Fitted bool `json:"fitted"`
	// MeasuredOn names where the rows were measured: the native
	// calibration's host, or the GPUs of the fitted rows ("" = not
	// recorded); Measured when.
	MeasuredOn string `json:"measured_on"`
	Measured   string `json:"measured"`
	// Host is the native calibration's recorded host, ThisHost the one
	// this estimate ran on (native engine on a CPU only).
	Host     *hardware.Host `json:"host,omitempty"`
	ThisHost *hardware.Host `json:"this_host,omitempty"`
	// Applies is "same" when the band was measured on the device priced,
	// "different" when not (the band does not apply here), "unknown" when
	// the record cannot tell; Why says which and why.
	Applies hardware.HostMatch `json:"applies"`
	Why     string             `json:"why"`
}

// Band returns r's error band for the device hw. this is the machine the
// estimate runs on (hardware.ThisHost, or a stand-in in tests): a native
// estimate on a CPU is about this machine, so its band applies only when
// this is the calibration's host.
func (r *Result) Band(hw *hardware.GPU, this hardware.Host) Band {
	c := &r.Coeffs
	b := Band{Family: r.Family, TTFT: c.ErrTTFT, TPOT: c.ErrTPOT, Throughput: c.ErrThroughput,
		TTFTP90: c.ErrTTFTP90, TPOTP90: c.ErrTPOTP90, ThroughputP90: c.ErrThroughputP90, Measured: c.Measured}
	b.Fitted = b.TTFT > 0 || b.TPOT > 0 || b.Throughput > 0
	if sp, ok := r.Engine.Spec(); ok && sp.Local {
		b.nativeHost(c.Host, hw, this)
		return b
	}
	b.MeasuredOn = strings.Join(c.GPUs, ", ")
	switch {
	case len(c.GPUs) == 0:
		b.Applies, b.Why = hardware.UncertainHost, "the coefficients do not record which GPUs their rows were measured on"
	case slices.Contains(c.GPUs, hw.Name):
		b.Applies, b.Why = hardware.SameHost, fmt.Sprintf("%s is among the GPUs the rows were measured on", hw.Name)
	default:
		b.Applies, b.Why = hardware.OtherHost, fmt.Sprintf("no fitted row was measured on %s: the band is that of the GPUs listed, and the estimate for %s extrapolates from its datasheet figures", hw.Name, hw.Name)
	}
	return b
}

func (b *Band) nativeHost(rec *hardware.Host, hw *hardware.GPU, this hardware.Host) {
	if rec != nil {
		h := *rec
		b.Host = &h
		b.MeasuredOn = "the calibration's host (" + h.String() + ")"
	}
	if hw.Backend != hardware.CPU {
		b.Applies, b.Why = hardware.OtherHost, fmt.Sprintf("the native calibration measured a CPU host, not %s", hw.Name)
		return
	}
	b.ThisHost = &this
	if rec == nil || rec.Zero() {
		b.Applies, b.Why = hardware.UncertainHost, "the calibration does not record its host, so whether this is that host cannot be told"
		return
	}
	b.Applies, b.Why = rec.Compare(this)
}
