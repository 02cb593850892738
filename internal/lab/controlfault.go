package lab

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

// nodeActionTimeout bounds one node action (a server's stop or start).
const nodeActionTimeout = 3 * time.Minute

// serveFaults adds the fault endpoints to the control socket:
//
//	POST /node       NodeRequest → FaultRecord (409 when the lab has no servers)
//	POST /link/fault LinkRequest → LinkFault (the change, kept for healing)
//	POST /link/heal  LinkHeal    → FaultRecord (the previous parameters are back)
func (l *Lab) serveFaults(mux *http.ServeMux) {
	mux.HandleFunc("POST /node", func(w http.ResponseWriter, r *http.Request) {
		var req NodeRequest
		if !decode(w, r, &req) {
			return
		}
		// A client that goes away (Ctrl-C) does not stop an action half-way.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), nodeActionTimeout)
		defer cancel()
		rec, err := l.NodeAction(ctx, req)
		switch {
		case errors.Is(err, errNoServers):
			writeJSON(w, http.StatusConflict, apiError{err.Error()})
		case err != nil:
			writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
		default:
			writeJSON(w, http.StatusOK, rec)
		}
	})
	mux.HandleFunc("POST /link/fault", func(w http.ResponseWriter, r *http.Request) {
		var req LinkRequest
		if !decode(w, r, &req) {
			return
		}
		id, rec, err := l.LinkFault(req)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, LinkFault{ID: id, Record: rec, Status: l.Status()})
	})
	mux.HandleFunc("POST /link/heal", func(w http.ResponseWriter, r *http.Request) {
		var req LinkHeal
		if !decode(w, r, &req) {
			return
		}
		rec, err := l.HealLink(req.ID)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, rec)
	})
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{"bad request: " + err.Error()})
		return false
	}
	return true
}

// Node performs a node action on the lab's servers (POST /node). It waits
// for the action however long it takes (up to a few minutes).
func (c *Client) Node(req NodeRequest) (FaultRecord, error) {
	var rec FaultRecord
	b, _ := json.Marshal(req)
	long := &Client{Name: c.Name, hc: &http.Client{Transport: c.hc.Transport, Timeout: nodeActionTimeout + 10*time.Second}}
	err := long.do("POST", "/node", b, &rec)
	return rec, err
}

// LinkFault applies a link change that HealLink undoes (POST /link/fault).
func (c *Client) LinkFault(req LinkRequest) (LinkFault, error) {
	var ans LinkFault
	b, _ := json.Marshal(req)
	err := c.do("POST", "/link/fault", b, &ans)
	return ans, err
}

// HealLink puts back what the LinkFault id changed (POST /link/heal).
func (c *Client) HealLink(id string) (FaultRecord, error) {
	var rec FaultRecord
	b, _ := json.Marshal(LinkHeal{ID: id})
	err := c.do("POST", "/link/heal", b, &rec)
	return rec, err
}
