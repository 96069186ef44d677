package processor

// FrontierWired reports whether a's Run started the frontier service (the
// watcher of the frontier topic) and its record loop calls frontierTick.
func FrontierWired(a *App) bool {
	v, ok := frontierServices.Load(a)
	if !ok {
		return false
	}
	fs := v.(*frontierService)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.watcher != nil && fs.ticked.Load()
}
