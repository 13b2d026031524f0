package sqlguard

import (
	"encoding/binary"
	"fmt"
	"hash"
	"strconv"
	"time"
)

// fieldOverhead is the framing the encoder writes before each field.
const fieldOverhead = 9

// encoder hashes a result set so that no two different result sets encode
// the same way: every field is length-prefixed with a NULL marker and every
// row starts with a separator. It also enforces Limits as the bytes go by.
type encoder struct {
	h      hash.Hash
	lim    Limits
	rows   int
	total  int
	header [fieldOverhead]byte
}

func newEncoder(h hash.Hash, lim Limits) *encoder {
	return &encoder{h: h, lim: lim}
}

func (e *encoder) columns(names []string) error {
	for _, n := range names {
		e.total += fieldOverhead + len(n)
		e.field([]byte(n), false)
	}
	if e.total > e.lim.MaxResultBytes {
		return resultTooLarge(e.lim.MaxResultBytes)
	}
	return nil
}

// row checks the limits before hashing, so that what was hashed always fits.
func (e *encoder) row(cells []cell) error {
	e.rows++
	if e.rows > e.lim.MaxRows {
		return tooManyRows(e.lim.MaxRows)
	}
	size := 1
	for _, c := range cells {
		size += fieldOverhead + len(c.b)
	}
	if size > e.lim.MaxRowBytes {
		return rowTooLarge(e.lim.MaxRowBytes)
	}
	if e.total += size; e.total > e.lim.MaxResultBytes {
		return resultTooLarge(e.lim.MaxResultBytes)
	}
	e.h.Write([]byte{0xff})
	for _, c := range cells {
		e.field(c.b, c.null)
	}
	return nil
}

func (e *encoder) field(b []byte, null bool) {
	e.header[0] = 0
	if null {
		e.header[0] = 1
	}
	binary.BigEndian.PutUint64(e.header[1:], uint64(len(b)))
	e.h.Write(e.header[:])
	e.h.Write(b)
}

func (e *encoder) sum() []byte { return e.h.Sum(nil) }

// cell receives one value. Scanning into sql.RawBytes would lose the
// difference between NULL and an empty string whenever the driver hands a
// string over, so values are taken as the driver gives them.
type cell struct {
	b    []byte
	null bool
}

func (c *cell) Scan(src any) error {
	c.null = src == nil
	c.b = appendValue(c.b[:0], src)
	return nil
}

// appendValue renders the driver.Value types the way database/sql converts
// them to bytes.
func appendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return b
	case []byte:
		return append(b, v...)
	case string:
		return append(b, v...)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(b, v)
	case time.Time:
		return v.AppendFormat(b, time.RFC3339Nano)
	}
	return fmt.Append(b, v)
}
