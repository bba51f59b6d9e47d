//go:build race

package parser

// raceEnabled: the race detector slows some paths more than others, so
// rates are not compared under it.
const raceEnabled = true
