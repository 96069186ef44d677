package processor

// PoisonKeys lists the bad records a's poison registry holds decisions
// for, as topic/partition@offset.
func PoisonKeys(a *App) []string {
	a.poisonMu.Lock()
	defer a.poisonMu.Unlock()
	var out []string
	for k := range a.poison {
		out = append(out, k.String())
	}
	return out
}
