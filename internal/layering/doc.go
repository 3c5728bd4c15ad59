// Package layering holds no code: its test is the intended import graph of
// the module's packages (go-containerregistry's depcheck habit). Each
// package is listed with the project packages it may import; the test
// fails on any other edge and on a listed edge that is gone, so the graph
// changes only when this table does. The layers, lowest first, are those
// of the README's Layout section.
package layering
