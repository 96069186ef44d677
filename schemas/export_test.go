package schemas

// EncodeGoavro exposes the goavro reference encoder to the external tests.
func EncodeGoavro[T Event](s *Spec[T], v T) ([]byte, error) { return s.encodeGoavro(nil, v) }
