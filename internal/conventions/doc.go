// Package conventions holds tests of the house conventions that span
// packages: every options struct validates (options_test.go), and its
// errors name the option, not a command-line flag. It has no code of its
// own.
package conventions
