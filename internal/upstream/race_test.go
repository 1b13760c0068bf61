//go:build race

package upstream_test

// raceEnabled: the race detector's shadow memory counts in RSS.
const raceEnabled = true
