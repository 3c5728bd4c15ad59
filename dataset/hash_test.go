package dataset

import "testing"

// TestHashRows: the hash is pinned (caches written before keep matching),
// and it tells apart rows split differently.
func TestHashRows(t *testing.T) {
	rows := [][]int32{{1, 2, 3}, {4}}
	if got, want := HashRows(rows), "977161a9d0bade49631811d69b20be9641c9aadbd20294807391e0c8f184d310"; got != want {
		t.Errorf("HashRows = %s, want %s", got, want)
	}
	if HashRows(rows) == HashRows([][]int32{{1, 2}, {3, 4}}) {
		t.Error("rows split differently hash the same")
	}
	if HashRows(rows) != HashRows([][]int32{{1, 2, 3}, {4}}) {
		t.Error("the same rows hash differently")
	}
}
