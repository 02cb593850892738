package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// CutShort says that a history's last line is incomplete: the recording
// stopped mid-write (a crash, a kill, a full disk). Everything before it
// was read.
type CutShort struct {
	Ops   int // complete operations read before it
	Line  int // 1-based line number of the partial line
	Bytes int // length of the partial line
}

func (c *CutShort) String() string {
	return fmt.Sprintf("history cut short after %d complete operations at line %d (a partial line of %d bytes: the recording stopped mid-write)",
		c.Ops, c.Line, c.Bytes)
}

// ParseError is a malformed line that is not the last one: the history
// cannot be trusted past it.
type ParseError struct {
	File string
	Line int
	Err  error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// Reader streams operations from a history.jsonl.
type Reader struct {
	br   *bufio.Reader
	name string
	c    io.Closer
	line int // lines consumed
	opLn int // line of the op Next returned last
	ops  int
	cut  *CutShort
	err  error // sticky: io.EOF at the end, or the first error
	buf  []byte
}

// NewReader reads operations from r; name is used in errors (a file name).
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 1<<20), name: name}
}

// Open opens a history file; Close it when done.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	r := NewReader(f, path)
	r.c = f
	return r, nil
}

// Close closes the file Open opened.
func (r *Reader) Close() error {
	if r.c == nil {
		return nil
	}
	return r.c.Close()
}

// Next returns the next operation. At the end it returns io.EOF; then
// CutShort says whether the last line was incomplete. A malformed line
// anywhere else is a *ParseError. Blank lines are skipped.
func (r *Reader) Next() (Op, error) {
	for r.err == nil {
		line, err := r.readLine()
		if err != nil && err != io.EOF {
			r.err = fmt.Errorf("read %s: %w", r.name, err)
			break
		}
		atEOF := err == io.EOF
		if len(line) == 0 && atEOF {
			r.err = io.EOF
			break
		}
		r.line++
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			if atEOF {
				r.err = io.EOF
			}
			continue
		}
		var op Op
		perr := decodeOp(trimmed, &op)
		if perr == nil {
			r.ops++
			r.opLn = r.line
			if atEOF {
				r.err = io.EOF
			}
			return op, nil
		}
		// A bad line is a crash's cut-short tail only when nothing but
		// blanks (or the zeros a crashed file system leaves) follows it.
		if atEOF || r.restIsEmpty() {
			r.cut = &CutShort{Ops: r.ops, Line: r.line, Bytes: len(line)}
			r.err = io.EOF
			break
		}
		r.err = &ParseError{File: r.name, Line: r.line, Err: perr}
	}
	return Op{}, r.err
}

// Line is the 1-based line number of the operation Next returned last.
func (r *Reader) Line() int { return r.opLn }

// CutShort is the incomplete last line, once Next has returned io.EOF;
// nil when the history ended cleanly.
func (r *Reader) CutShort() *CutShort { return r.cut }

// readLine returns the next line without its newline; io.EOF with the
// last line when it has none.
func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.buf = append(r.buf, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			return r.buf, err
		}
		return r.buf[:len(r.buf)-1], nil
	}
}

// restIsEmpty reports whether only whitespace and NUL bytes remain.
func (r *Reader) restIsEmpty() bool {
	for {
		b, err := r.br.ReadByte()
		if err != nil {
			return errors.Is(err, io.EOF)
		}
		switch b {
		case ' ', '\t', '\n', '\r', 0:
			continue
		}
		_ = r.br.UnreadByte()
		return false
	}
}

func decodeOp(line []byte, op *Op) error {
	if line[0] != '{' {
		return errors.New("not a JSON object")
	}
	if err := json.Unmarshal(line, op); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("malformed JSON: %v", err)
		}
		return fmt.Errorf("malformed operation: %v", err)
	}
	if err := op.Validate(); err != nil {
		return fmt.Errorf("malformed operation: %v", err)
	}
	return nil
}

// Read reads a whole history file. cut is non-nil when its last line was
// cut short (ops holds everything before it).
func Read(path string) (ops []Op, cut *CutShort, err error) {
	r, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	for {
		op, err := r.Next()
		if err == io.EOF {
			return ops, r.CutShort(), nil
		}
		if err != nil {
			return ops, nil, err
		}
		ops = append(ops, op)
	}
}
