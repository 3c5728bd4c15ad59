package groundtruth

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// TestCommittedCoefficientsReproduce: estimate/coefficients.json is, byte
// for byte, what calibrate fits from the shared ground truth (as
// "autocompress calibrate --out estimate/coefficients.json" writes it),
// where and when each family's rows were measured included: nothing in it
// comes from the machine that fits it.
func TestCommittedCoefficientsReproduce(t *testing.T) {
	if testing.Short() {
		t.Skip("a full calibrate with validation (minutes); runs without -short")
	}
	dir := sdtest.Require(t, "groundtruth")
	ps, _, err := Load(dir, true, "")
	if err != nil {
		t.Fatal(err)
	}
	cf, err := Calibrate(context.Background(), ps, estimate.PriorCoeffs(), 400, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(cf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	want, err := os.ReadFile(filepath.Join("..", "coefficients.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("calibrate's fit differs from estimate/coefficients.json; regenerate with\n  autocompress calibrate --out estimate/coefficients.json --force")
	}
	if v := cf.Families["vllm"]; len(v.GPUs) == 0 || v.Measured == "" {
		t.Errorf("vllm family records no GPUs or dates: %v, %q", v.GPUs, v.Measured)
	}
}

// TestCommittedMarginsReproduce: estimate/margins.json is, byte for byte,
// what validate-estimator --margins-out writes from the shared ground
// truth (its default 200 iterations).
func TestCommittedMarginsReproduce(t *testing.T) {
	if testing.Short() {
		t.Skip("the held-out protocol (minutes); runs without -short")
	}
	dir := sdtest.Require(t, "groundtruth")
	ps, _, err := Load(dir, true, "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Margins(context.Background(), ps, estimate.PriorCoeffs(), 200)
	if err != nil {
		t.Fatal(err)
	}
	got, err := MarginJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("..", "margins.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the held-out margins differ from estimate/margins.json; regenerate with\n  %s", MarginsCommand)
	}
}
