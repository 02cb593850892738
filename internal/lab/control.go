package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// The control socket lets other replab commands (status, link set) reach
// the process that holds a lab's TUN devices: HTTP+JSON over a unix socket
// in the lab's state directory.

// LinkRequest is the body of POST /link.
type LinkRequest struct {
	From string   `json:"from"`
	To   string   `json:"to"`
	Both bool     `json:"both"`
	Set  []string `json:"set"`
}

type apiError struct {
	Error string `json:"error"`
}

func (l *Lab) serveControl() (func(), error) {
	path := l.rec.Control
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, l.Status())
	})
	mux.HandleFunc("POST /link", func(w http.ResponseWriter, r *http.Request) {
		var req LinkRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{"bad request: " + err.Error()})
			return
		}
		if err := l.setLinkLogged(req); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, l.Status())
	})
	l.serveFaults(mux)
	mux.HandleFunc("POST /capture", l.serveCapture)
	mux.HandleFunc("POST /capture/stop", func(w http.ResponseWriter, r *http.Request) {
		var req captureStop
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{"bad request: " + err.Error()})
			return
		}
		if err := l.RequestStop(req.ID); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = os.Remove(path)
	}, nil
}

// CaptureEvent is one line of the answer to POST /capture: the first when
// the captures have started, the second (Done) when they have stopped.
type CaptureEvent struct {
	ID       string          `json:"id"`
	Done     bool            `json:"done"`
	Captures []CaptureStatus `json:"captures"`
	Error    string          `json:"error,omitempty"`
}

type captureStop struct {
	ID string `json:"id"`
}

// serveCapture runs one capture session for the length of the request:
// it ends after req.For, on POST /capture/stop, when the client goes away
// (a killed replab capture leaves nothing running) or when the lab closes.
func (l *Lab) serveCapture(w http.ResponseWriter, r *http.Request) {
	var req CaptureRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{"bad request: " + err.Error()})
		return
	}
	id, started, err := l.StartSession(req)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	_ = enc.Encode(CaptureEvent{ID: id, Captures: started})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	var timeout <-chan time.Time
	if req.For > 0 {
		t := time.NewTimer(req.For)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
	case <-l.sessionStopped(id):
	case <-r.Context().Done():
	case <-l.closing:
	}
	final, err := l.StopSession(id)
	ev := CaptureEvent{ID: id, Done: true, Captures: final}
	if err != nil {
		ev.Error = err.Error()
	}
	_ = enc.Encode(ev)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Client talks to a running lab.
type Client struct {
	Name string
	hc   *http.Client
}

// Connect finds a running lab: the named one, or the only one running
// when name is "".
func Connect(root, name string) (*Client, error) {
	if root == "" {
		root = DefaultStateRoot
	}
	if name == "" {
		run := Running(root)
		switch len(run) {
		case 0:
			return nil, errors.New("no lab is running: start one with `replab lab up FILE`")
		case 1:
			name = run[0]
		default:
			return nil, fmt.Errorf("%d labs are running (%s): choose one with --lab NAME", len(run), strings.Join(run, ", "))
		}
	}
	r, err := loadRecord(root, name)
	if err != nil || !r.alive() {
		return nil, fmt.Errorf("lab %s is not running: start it with `replab lab up FILE`", name)
	}
	sock := r.Control
	hc := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}},
	}
	return &Client{Name: name, hc: hc}, nil
}

// Status fetches the lab's status.
func (c *Client) Status() (Status, error) {
	var st Status
	err := c.do("GET", "/status", nil, &st)
	return st, err
}

// SetLink changes a running link (see Lab.SetLink).
func (c *Client) SetLink(req LinkRequest) (Status, error) {
	var st Status
	b, _ := json.Marshal(req)
	err := c.do("POST", "/link", b, &st)
	return st, err
}

// Capture runs a capture session on the lab: started is called with the
// files once the captures run; Capture returns their final counts when
// the session ends (req.For elapsed, or ctx cancelled: then it asks the
// lab to stop the session and waits for the counts).
func (c *Client) Capture(ctx context.Context, req CaptureRequest, started func([]CaptureStatus)) ([]CaptureStatus, error) {
	b, _ := json.Marshal(req)
	hreq, err := http.NewRequest("POST", "http://lab/capture", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	long := *c.hc
	long.Timeout = 0 // the session lasts as long as it lasts
	resp, err := long.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("talk to lab %s: %w", c.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var ae apiError
		if json.Unmarshal(b, &ae) == nil && ae.Error != "" {
			return nil, errors.New(ae.Error)
		}
		return nil, fmt.Errorf("lab %s: %s", c.Name, resp.Status)
	}
	dec := json.NewDecoder(resp.Body)
	var first CaptureEvent
	if err := dec.Decode(&first); err != nil {
		return nil, fmt.Errorf("read answer of lab %s: %w", c.Name, err)
	}
	if started != nil {
		started(first.Captures)
	}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			b, _ := json.Marshal(captureStop{ID: first.ID})
			_ = c.do("POST", "/capture/stop", b, &struct{}{})
		case <-stopped:
		}
	}()
	var last CaptureEvent
	if err := dec.Decode(&last); err != nil || !last.Done {
		var files []string
		for _, cs := range first.Captures {
			files = append(files, cs.File)
		}
		return first.Captures, fmt.Errorf("lab %s went away during the capture; %s hold what was recorded until then", c.Name, strings.Join(files, ", "))
	}
	if last.Error != "" {
		return last.Captures, errors.New(last.Error)
	}
	return last.Captures, nil
}

func (c *Client) do(method, path string, body []byte, out any) error {
	req, err := http.NewRequest(method, "http://lab"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("talk to lab %s: %w", c.Name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read answer of lab %s: %w", c.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		var ae apiError
		if json.Unmarshal(b, &ae) == nil && ae.Error != "" {
			return errors.New(ae.Error)
		}
		return fmt.Errorf("lab %s: %s", c.Name, resp.Status)
	}
	return json.Unmarshal(b, out)
}

// SiteNetns returns the namespace and cgroups of a site of a running lab,
// for `replab exec`.
func SiteNetns(root, labName, site string) (netns string, cgroups []string, err error) {
	if root == "" {
		root = DefaultStateRoot
	}
	c, err := Connect(root, labName)
	if err != nil {
		return "", nil, err
	}
	st, err := c.Status()
	if err != nil {
		return "", nil, err
	}
	var names []string
	for _, s := range st.Sites {
		names = append(names, s.Name)
		if s.Name == site {
			r, err := loadRecord(root, c.Name)
			if err != nil {
				return "", nil, err
			}
			for _, cg := range r.Cgroups {
				if strings.HasSuffix(cg, "/"+s.Netns) {
					cgroups = append(cgroups, cg)
				}
			}
			return s.Netns, cgroups, nil
		}
	}
	return "", nil, fmt.Errorf("lab %s has no site %q (sites: %s)", c.Name, site, strings.Join(names, ", "))
}
