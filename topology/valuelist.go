package topology

import (
	"encoding/binary"
	"fmt"
)

// Join stores keep every record of a key at one timestamp in one value: a
// list of uvarint-length-prefixed encoded values, in arrival order.

func appendListItem(dst, item []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(item)))
	return append(dst, item...)
}

func eachListItem(list []byte, fn func(item []byte) error) error {
	for len(list) > 0 {
		n, w := binary.Uvarint(list)
		if w <= 0 || uint64(len(list)-w) < n {
			return fmt.Errorf("corrupt value list")
		}
		if err := fn(list[w : w+int(n)]); err != nil {
			return err
		}
		list = list[w+int(n):]
	}
	return nil
}
