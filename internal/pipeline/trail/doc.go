// Package trail is the pipeline's change log on disk: the extract writes the
// source's committed transactions into a trail, the pump ships a trail's
// bytes to the collector, which writes an identical remote trail, and the
// replicat reads a trail and applies it. This package owns the record type,
// its binary encoding, a crash-safe append-only Writer and a Reader that
// follows a growing trail.
//
// # File format
//
// A trail file is an 8-byte header, the magic "RPLTRL01", followed by
// frames, one per record. The file is only ever appended to (recovery may cut
// a torn or incomplete tail, see below).
//
// A frame is
//
//	length  uint32, little-endian: n, the payload's size (at most MaxPayload, 64 MiB)
//	payload n bytes, see below
//	crc     uint32, little-endian: CRC-32C (Castagnoli) of the 4 length bytes and the payload
//
// A payload is
//
//	op      byte: 'B' begin, 'I' insert, 'U' update, 'D' delete, 'C' commit
//	lsn     uvarint
//	xid     uvarint (at most 2^32-1)
//	time    varint (zig-zag), Unix nanoseconds
//
// and, for changes (insert, update, delete) only,
//
//	schema  string
//	table   string
//	ncol    uvarint, then ncol times: name string, flag byte (0 value, 1 NULL), value string ("" when NULL)
//	nkey    uvarint, then nkey times: uvarint index into the columns
//	nold    uvarint (updates only; 0 = none, else nkey), then nold times: flag byte, value string
//
// A string is a uvarint length followed by that many bytes. Varints are
// encoding/binary's, and must be minimal (no redundant 0x80 groups), so every
// record has exactly one encoding and a decoded record re-encodes to the same
// bytes. A payload has no trailing bytes.
//
// # Positions
//
// A Pos counts bytes of frames: Pos 0 is the start of the first frame (file
// offset 8, just after the header), and the Pos after a record is the file
// offset just after its frame minus 8. Error messages name positions as Pos.
// Because a copied trail (see Reader.NextFrame and Writer.AppendFrame) is
// byte-identical, positions are the same at both sites.
//
// # Crash safety
//
// The Writer buffers frames in memory and writes them with one write(2) per
// Sync (or when the buffer passes 1 MiB); only Sync makes them durable. On
// opening an existing trail, Create cuts everything after the last
// checksum-valid commit record: a torn frame (partial, or failing its
// checksum, or with an impossible length) and everything after it, because
// after a crash unsynced pages may reach the disk in any order; and the
// records of a transaction whose commit is missing, because the source sends
// it again. A frame whose checksum passes but whose payload does not decode
// is not a crash artefact, and Create refuses the trail rather than cut it.
//
// A Reader sees records as soon as they are written, before they are
// durable, so after a writer's crash a consumer may see a transaction twice
// (once cut, once resent): consumers apply a transaction at its commit record
// and drop transactions whose commit LSN (the begin record's LSN) is not
// above what they already hold. A Reader that finds, while waiting, the
// trail cut below its position by a restarted writer returns ErrCut; reopen
// it from the last position applied.
//
// FORMAT.md in this directory has the same description with worked examples.
package trail
