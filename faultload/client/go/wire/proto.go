package wire

// SampleResponse decoded as the Python protobuf runtime (upb) decodes it, from the SDK's descriptor
// (tinker/proto/tinker_public_pb2.py, proto3):
//
//	SampleResponse:     1 sequences: repeated SampledSequence; 2 prompt_logprobs: optional bytes;
//	                    3 topk_prompt_logprobs: optional TopkPromptLogprobs; 4 prompt_cache_hit_tokens: int32
//	SampledSequence:    1 stop_reason: StopReason (open enum, int32; STOP = 0, LENGTH = 1);
//	                    2 tokens: bytes; 3 logprobs: optional bytes
//	TopkPromptLogprobs: 1 token_ids: bytes; 2 logprobs: bytes; 3 k: uint32; 4 prompt_length: uint32
//
// upb's rules, found by feeding it crafted bodies: a known field with another wire type is an unknown field;
// scalars and bytes take their last value, a repeated singular message merges; a varint may take 10 bytes
// (the last one's high bits dropped), a tag or a length at most 5; field number 0, wire types 6 and 7, an
// unmatched end-group and nesting (messages and groups) past 100 are errors.

import (
	"encoding/binary"
	"math"
)

const pbMaxDepth = 100

// pbSeq is one SampledSequence: its bytes fields point into the body.
type pbSeq struct {
	stop             int32
	tokens, logprobs []byte
}

type pbTopk struct {
	ids, lps        []byte
	k, promptLength uint32
}

type pbResponse struct {
	seqs   []pbSeq
	plp    []byte
	hasPlp bool
	top    pbTopk
	hasTop bool
}

// pbVarint reads a varint of at most max bytes (upb: 10 for values, 5 for tags and lengths).
func pbVarint(b []byte, max int) (uint64, int, bool) {
	var v uint64
	for i := 0; i < max && i < len(b); i++ {
		v |= uint64(b[i]&0x7F) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1, true
		}
	}
	return 0, 0, false
}

// pbField reads one field's tag and payload: bytes for wire type 2, the value for 0, 1, 5 (skipped kinds).
type pbField struct {
	num   uint32
	wt    byte
	value uint64
	data  []byte
}

// pbNext reads the field at b; n is its length. Groups are skipped whole (depth counts them).
func pbNext(b []byte, depth int) (f pbField, n int, ok bool) {
	tag, n, ok := pbVarint(b, 5)
	if !ok || tag > 0xFFFFFFFF || tag>>3 == 0 {
		return f, 0, false
	}
	f.num, f.wt = uint32(tag>>3), byte(tag&7)
	rest := b[n:]
	switch f.wt {
	case 0:
		v, m, ok := pbVarint(rest, 10)
		f.value = v
		return f, n + m, ok
	case 1, 5:
		size := 8
		if f.wt == 5 {
			size = 4
		}
		if len(rest) < size {
			return f, 0, false
		}
		return f, n + size, true
	case 2:
		size, m, ok := pbVarint(rest, 5)
		if !ok || size > uint64(len(rest)-m) {
			return f, 0, false
		}
		f.data = rest[m : m+int(size)]
		return f, n + m + int(size), true
	case 3:
		m, ok := pbSkipGroup(rest, f.num, depth+1)
		return f, n + m, ok
	}
	return f, 0, false // 4 (an end-group outside its group), 6, 7
}

// pbSkipGroup skips an unknown group's fields up to its end-group tag.
func pbSkipGroup(b []byte, num uint32, depth int) (int, bool) {
	if depth > pbMaxDepth {
		return 0, false
	}
	at := 0
	for at < len(b) {
		tag, n, ok := pbVarint(b[at:], 5)
		if ok && tag <= 0xFFFFFFFF && tag&7 == 4 {
			return at + n, uint32(tag>>3) == num
		}
		_, m, ok := pbNext(b[at:], depth)
		if !ok {
			return 0, false
		}
		at += m
	}
	return 0, false
}

// pbFields calls visit for each field of a message body; false when the body is corrupt.
func pbFields(b []byte, depth int, visit func(f pbField) bool) bool {
	for len(b) > 0 {
		f, n, ok := pbNext(b, depth)
		if !ok || !visit(f) {
			return false
		}
		b = b[n:]
	}
	return true
}

func (r *pbResponse) parse(body []byte) bool {
	r.seqs, r.plp, r.hasPlp, r.top, r.hasTop = r.seqs[:0], nil, false, pbTopk{}, false
	return pbFields(body, 0, func(f pbField) bool {
		switch {
		case f.num == 1 && f.wt == 2:
			r.seqs = append(r.seqs, pbSeq{})
			return parseSeq(&r.seqs[len(r.seqs)-1], f.data)
		case f.num == 2 && f.wt == 2:
			r.plp, r.hasPlp = f.data, true
		case f.num == 3 && f.wt == 2:
			r.hasTop = true
			return parseTopk(&r.top, f.data)
		}
		return true
	})
}

func parseSeq(s *pbSeq, b []byte) bool {
	return pbFields(b, 1, func(f pbField) bool {
		switch {
		case f.num == 1 && f.wt == 0:
			s.stop = int32(f.value)
		case f.num == 2 && f.wt == 2:
			s.tokens = f.data
		case f.num == 3 && f.wt == 2:
			s.logprobs = f.data
		}
		return true
	})
}

func parseTopk(t *pbTopk, b []byte) bool {
	return pbFields(b, 1, func(f pbField) bool {
		switch {
		case f.num == 1 && f.wt == 2:
			t.ids = f.data
		case f.num == 2 && f.wt == 2:
			t.lps = f.data
		case f.num == 3 && f.wt == 0:
			t.k = uint32(f.value)
		case f.num == 4 && f.wt == 0:
			t.promptLength = uint32(f.value)
		}
		return true
	})
}

// int32s and float32s read a packed little-endian field (np.frombuffer on x86) onto dst.
func int32s(dst []int32, b []byte) []int32 {
	for i := 0; i+4 <= len(b); i += 4 {
		dst = append(dst, int32(binary.LittleEndian.Uint32(b[i:])))
	}
	return dst
}

func float32s(dst []float32, b []byte) []float32 {
	for i := 0; i+4 <= len(b); i += 4 {
		dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
	}
	return dst
}
