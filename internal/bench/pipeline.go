package bench

// PipelineSystems are opt-in contenders (by name, --systems) that compare
// the processor's pipelined commits on and off, whatever its default:
// tidemark's adaptive policy with the record loop processing while EndTxn
// runs, and with every commit blocking the loop.
func PipelineSystems() []System {
	return []System{
		{Name: "tidemark-adaptive-pipe", Kind: "tidemark", Policy: "adaptive", Pipelined: "on"},
		{Name: "tidemark-adaptive-nopipe", Kind: "tidemark", Policy: "adaptive", Pipelined: "off"},
	}
}
