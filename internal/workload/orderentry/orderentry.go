// Package orderentry is the storage study's workload: an order-entry
// application in the spirit of Swingbench's "order entry" (customers who
// log on, browse products, order them; warehouses that process the
// orders), ten tables scaled by the number of customers, and five
// transaction types whose default weights give the study's 50 % selects,
// 30 % inserts and 20 % updates.
package orderentry

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"replab/internal/engine"
	"replab/internal/workload"
)

// Factory registers the workload as kind "order-entry".
var Factory = workload.Factory{Kind: "order-entry", New: New}

// Option defaults and bounds.
const (
	DefaultCustomers = 2000 // about 6 MB in PostgreSQL; the study's 2 GB is about 1,000,000
	MaxCustomers     = 50_000_000
	MaxWarehouses    = 10_000
	DefaultBrowseMax = 10 // products looked at per browse_products: 1..browse_max
	MaxBrowseMax     = 100
	MaxWeight        = 1000
	MaxDelay         = time.Minute
)

// Transaction type names, in the order Transactions lists them.
const (
	NewCustomer    = "new_customer"
	BrowseProducts = "browse_products"
	OrderProducts  = "order_products"
	ProcessOrders  = "process_orders"
	BrowseOrders   = "browse_orders"
)

// typeNames lists the types in order.
var typeNames = []string{NewCustomer, BrowseProducts, OrderProducts, ProcessOrders, BrowseOrders}

// DefaultWeights are Swingbench's order-entry weights for the five types
// the study ran (its "update customer details" left out).
var DefaultWeights = map[string]int{NewCustomer: 15, BrowseProducts: 50, OrderProducts: 40, ProcessOrders: 5, BrowseOrders: 5}

// Workload is the order-entry workload with its options resolved.
type Workload struct {
	customers  int64
	warehouses int64
	browseMax  int
	weights    map[string]int
	readsAt    string
	delayMin   time.Duration
	delayMax   time.Duration
	users      int // [run] users: how the customers are shared out
	seed       uint64
	dialect    engine.Dialect

	keys *keys

	totalOnce sync.Once
	tableRows map[string]int64
	total     int64
}

// New reads the options: customers, warehouses, the five weight_* keys,
// browse_max, reads_at and delay.
func New(o *workload.Options) (workload.Workload, error) {
	w := &Workload{
		customers: o.Int("customers", DefaultCustomers, 1, MaxCustomers),
		browseMax: int(o.Int("browse_max", DefaultBrowseMax, 1, MaxBrowseMax)),
		weights:   map[string]int{},
		readsAt:   readsAt(o.String("reads_at", "source", "source", "replica")),
		users:     1,
		seed:      uint64(o.Seed),
		dialect:   o.Dialect,
	}
	total := 0
	for _, name := range typeNames {
		wt := int(o.Int("weight_"+name, int64(DefaultWeights[name]), 0, MaxWeight))
		w.weights[name] = wt
		total += wt
	}
	if total == 0 {
		o.Errorf("weight_"+typeNames[len(typeNames)-1], "every weight_* is 0: give at least one transaction type a weight")
	}
	if s := o.String("delay", ""); s != "" {
		lo, hi, msg := parseRange(s)
		if msg != "" {
			o.Errorf("delay", "%s", msg)
		}
		w.delayMin, w.delayMax = lo, hi
	}
	w.warehouses = o.Int("warehouses", warehouses(w.customers), 1, MaxWarehouses)
	if o.Spec != nil && o.Spec.Run.Users > 0 {
		w.users = o.Spec.Run.Users
	}
	if o.Dialect != engine.Postgres && o.Dialect != engine.MySQL {
		return nil, workload.ErrNoDialect("order-entry", o.Dialect)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	w.keys = newKeys(binary.LittleEndian.Uint64(b[:]))
	return w, nil
}

// parseRange reads delay: "20ms" (fixed) or "10ms..50ms" (uniform), as
// [run] think is written; msg explains what is wrong, or is "".
func parseRange(s string) (lo, hi time.Duration, msg string) {
	const want = `want a duration like "20ms" or a range like "10ms..50ms"`
	a, b, isRange := strings.Cut(s, "..")
	lo, err := time.ParseDuration(strings.TrimSpace(a))
	if err != nil {
		return 0, 0, fmt.Sprintf("%q: %s", s, want)
	}
	hi = lo
	if isRange {
		if hi, err = time.ParseDuration(strings.TrimSpace(b)); err != nil {
			return 0, 0, fmt.Sprintf("%q: %s", s, want)
		}
	}
	switch {
	case lo < 0 || hi < 0:
		return 0, 0, fmt.Sprintf("%q: a delay cannot be negative", s)
	case hi < lo:
		return 0, 0, fmt.Sprintf("%q: the range's end is before its start", s)
	case hi > MaxDelay:
		return 0, 0, fmt.Sprintf("%q: at most %s", s, MaxDelay)
	}
	return lo, hi, ""
}

// readsAt maps the reads_at option to where the read-only types run.
func readsAt(v string) string {
	if v == "replica" {
		return workload.AtReplica
	}
	return workload.AtSource
}

// Name implements workload.Workload.
func (w *Workload) Name() string { return "order-entry" }

// Schema implements workload.Workload: the ten tables with their indexes,
// in both dialects.
func (w *Workload) Schema() engine.Schema {
	var s engine.Schema
	for _, t := range tables {
		et := engine.Table{Name: t.name, Create: map[engine.Dialect]string{}, Indexes: map[engine.Dialect][]string{}}
		for _, d := range []engine.Dialect{engine.Postgres, engine.MySQL} {
			et.Create[d] = t.create(d)
			et.Indexes[d] = t.indexes()
		}
		s.Tables = append(s.Tables, et)
	}
	return s
}

// count fills tableRows and total once.
func (w *Workload) count() {
	w.totalOnce.Do(func() {
		w.tableRows = map[string]int64{}
		for _, t := range tables {
			n := t.rowCount(w)
			w.tableRows[t.name] = n
			w.total += n
		}
	})
}

// TotalRows implements workload.Workload: rows in every table together.
func (w *Workload) TotalRows() int64 {
	w.count()
	return w.total
}

// TableRows is how many rows Load puts in each table, by name.
func (w *Workload) TableRows() map[string]int64 {
	w.count()
	m := make(map[string]int64, len(w.tableRows))
	for k, v := range w.tableRows {
		m[k] = v
	}
	return m
}

// Bytes of the loaded data in PostgreSQL 15, tables and indexes together,
// as the PostgreSQL test measures them: per customer (its addresses, card,
// logons, orders and items), per inventory row (Products per warehouse),
// and the products' tables.
const (
	bytesPerCustomer  = 1980
	bytesPerInventory = 78
	fixedBytes        = 900_000
)

// DataBytes implements workload.Sizer, roughly.
func (w *Workload) DataBytes() int64 {
	return fixedBytes + w.customers*bytesPerCustomer + Products*w.warehouses*bytesPerInventory
}

// Warehouses is how many warehouses there are.
func (w *Workload) Warehouses() int64 { return w.warehouses }

// warehouses is the default: one per 100 customers, at least 1 and at
// most 1,000 (Swingbench's number at its scale 1).
func warehouses(customers int64) int64 { return min(max(customers/100, 1), 1000) }

// Products is how many products there are, whatever the scale.
const Products = 1000

// Categories of products: Products/Categories products each.
const Categories = 25
