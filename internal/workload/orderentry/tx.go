package orderentry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"time"

	"replab/internal/engine"
	"replab/internal/workload"
)

// verb is what a statement does, for the mix.
type verb int

const (
	selectVerb verb = iota
	insertVerb
	updateVerb
)

// stmtDef is a statement in PostgreSQL's notation ($1, $2, … each once,
// in order); MySQL's is the same with ? for each.
type stmtDef struct {
	name string
	verb verb
	sql  string
}

var placeholder = regexp.MustCompile(`\$[0-9]+`)

// in is the statement in dialect.
func (s stmtDef) in(dialect engine.Dialect) string {
	if dialect == engine.MySQL {
		return placeholder.ReplaceAllString(s.sql, "?")
	}
	return s.sql
}

// processBatch is how many orders one process_orders takes at most
// (Swingbench's "rownum < 10").
const processBatch = 9

// restock is what arrives when an order finds too little of a product at
// its warehouse: the order takes what it wants and the warehouse is
// refilled by this many.
const restock = 1000

var stmts = map[string]stmtDef{
	"customer":     {"customer", selectVerb, `SELECT c.cust_first_name, c.cust_last_name, c.cust_email, c.credit_limit, c.customer_class, c.preferred_address, c.preferred_card, a.town, a.post_code FROM customers c JOIN addresses a ON a.address_id = c.preferred_address WHERE c.customer_id = $1`},
	"ins_customer": {"ins_customer", insertVerb, `INSERT INTO customers (customer_id, cust_first_name, cust_last_name, nls_language, nls_territory, credit_limit, cust_email, account_mgr_id, customer_since, customer_class, suggestions, dob, mailshot, partner_mailshot, preferred_address, preferred_card) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`},
	"ins_address":  {"ins_address", insertVerb, `INSERT INTO addresses (address_id, customer_id, date_created, house_no, street_name, town, county, country, post_code, zip_code) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`},
	"ins_card":     {"ins_card", insertVerb, `INSERT INTO card_details (card_id, customer_id, card_type, card_number, expiry_date, is_valid, security_code) VALUES ($1, $2, $3, $4, $5, $6, $7)`},
	"ins_logon":    {"ins_logon", insertVerb, `INSERT INTO logon (logon_id, customer_id, logon_date) VALUES ($1, $2, $3)`},
	"category":     {"category", selectVerb, `SELECT p.product_id, p.product_name, p.list_price, i.quantity_on_hand FROM product_information p JOIN inventories i ON i.product_id = p.product_id AND i.warehouse_id = $1 WHERE p.category_id = $2 ORDER BY p.product_id LIMIT 20`},
	"product":      {"product", selectVerb, `SELECT p.product_id, d.translated_name, d.translated_description, p.list_price, i.quantity_on_hand FROM product_information p JOIN product_descriptions d ON d.product_id = p.product_id AND d.language_id = 'US' JOIN inventories i ON i.product_id = p.product_id AND i.warehouse_id = $1 WHERE p.product_id = $2`},
	"ins_order":    {"ins_order", insertVerb, `INSERT INTO orders (order_id, order_date, order_mode, customer_id, order_status, order_total, sales_rep_id, promotion_id, warehouse_id, delivery_type, cost_of_delivery, wait_till_all_available, delivery_address_id, customer_class, card_id, invoice_address_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`},
	"stock":        {"stock", selectVerb, `SELECT p.list_price, i.quantity_on_hand FROM product_information p JOIN inventories i ON i.product_id = p.product_id AND i.warehouse_id = $1 WHERE p.product_id = $2`},
	"ins_item":     {"ins_item", insertVerb, `INSERT INTO order_items (order_id, line_item_id, product_id, unit_price, quantity, dispatch_date, return_date, gift_wrap, item_condition, supplier_id, estimated_delivery) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`},
	"take":         {"take", updateVerb, `UPDATE inventories SET quantity_on_hand = quantity_on_hand + $1 WHERE product_id = $2 AND warehouse_id = $3`},
	"total":        {"total", updateVerb, `UPDATE orders SET order_total = $1 WHERE order_id = $2`},
	"pending":      {"pending", selectVerb, `SELECT order_id FROM orders WHERE warehouse_id = $1 AND order_status <= 4 ORDER BY order_date, order_id LIMIT 9`},
	"process":      {"process", updateVerb, `UPDATE orders SET order_status = 5 WHERE order_status <= 4 AND order_id IN ($1, $2, $3, $4, $5, $6, $7, $8, $9)`},
	"orders":       {"orders", selectVerb, `SELECT o.order_id, o.order_date, o.order_status, o.order_total, i.line_item_id, i.product_id, i.unit_price, i.quantity FROM (SELECT order_id, order_date, order_status, order_total FROM orders WHERE customer_id = $1 ORDER BY order_date DESC LIMIT 5) o JOIN order_items i ON i.order_id = o.order_id ORDER BY o.order_date DESC, o.order_id, i.line_item_id`},
}

// typeStmts are each type's statements, by name.
var typeStmts = map[string][]string{
	NewCustomer:    {"ins_customer", "ins_address", "ins_card", "ins_logon", "customer"},
	BrowseProducts: {"category", "product"},
	OrderProducts:  {"ins_logon", "customer", "ins_order", "stock", "ins_item", "take", "total"},
	ProcessOrders:  {"pending", "process"},
	BrowseOrders:   {"customer", "orders"},
}

// Transactions implements workload.Workload: the five types in the
// order of typeNames; a type whose weight is 0 is left out. The read-only
// ones (browse_products, browse_orders) run where reads_at says; the
// types whose statements do not depend on each other's results
// (new_customer and the two browses) can be pipelined unless a delay is
// set.
func (w *Workload) Transactions() []workload.TxType {
	var types []workload.TxType
	for _, name := range typeNames {
		if w.weights[name] == 0 {
			continue
		}
		t := workload.TxType{Name: name, Weight: w.weights[name]}
		for _, s := range typeStmts[name] {
			t.Statements = append(t.Statements, workload.Statement{Name: s, SQL: stmts[s].in(w.dialect)})
		}
		switch name {
		case NewCustomer:
			t.Batch = w.newCustomer
		case BrowseProducts:
			t.Batch, t.ReadOnly, t.At = w.browseProducts, true, w.readsAt
		case OrderProducts:
			t.Run = w.orderProducts
		case ProcessOrders:
			t.Run = w.processOrders
		case BrowseOrders:
			t.Batch, t.ReadOnly, t.At = w.browseOrders, true, w.readsAt
		}
		if t.Run == nil {
			t.Run = w.runCalls(t.Batch)
		}
		if w.delayMax > 0 {
			t.Batch = nil // a pause between statements cannot be pipelined
		}
		types = append(types, t)
	}
	return types
}

// customerOf is a customer of user's, for one transaction: the customers
// are shared out among the [run] users (user i has those whose number
// minus one is i modulo the users), so no two users act for one customer
// unless there are fewer customers than users.
func (w *Workload) customerOf(user int, r *rand.Rand) int64 {
	c, u := w.customers, int64(user)%int64(w.users)
	if c <= int64(w.users) {
		return 1 + u%c
	}
	n := (c-1-u)/int64(w.users) + 1
	return 1 + u + int64(w.users)*r.Int64N(n)
}

// warehouseOf is user's warehouse: its orders are taken from and
// processed at it, its browsing shows its stock.
func (w *Workload) warehouseOf(user int) int64 { return 1 + int64(user)%w.Warehouses() }

// now is the time a transaction writes, to the second.
func now() time.Time { return time.Now().UTC().Truncate(time.Second) }

// newCustomer is a customer registering: customer, address, card and a
// first logon, then the customer's details read back. Every key is made
// here, so the statements do not depend on each other.
func (w *Workload) newCustomer(user int, r *rand.Rand, _ *workload.Scratch) []workload.Call {
	var ids [4]int64
	for i := range ids {
		id, err := w.keys.New(user)
		if err != nil {
			return []workload.Call{{Err: err}}
		}
		ids[i] = id
	}
	c, addr, card, logon := ids[0], ids[1], ids[2], ids[3]
	at := now()
	day := at.Truncate(24 * time.Hour)
	return []workload.Call{
		{Stmt: "ins_customer", Args: customerRow(r, c, one(r, classes...), day, addr, card), Rows: 1},
		{Stmt: "ins_address", Args: addressRow(r, addr, c, at), Rows: 1},
		{Stmt: "ins_card", Args: cardRow(r, card, c, day), Rows: 1},
		{Stmt: "ins_logon", Args: []any{logon, c, at}, Rows: 1},
		{Stmt: "customer", Args: []any{c}, Rows: -1},
	}
}

// browseProducts is a user looking at products in stock at its
// warehouse: a category's listing, then product pages, 1..browse_max
// lookups in all.
func (w *Workload) browseProducts(user int, r *rand.Rand, _ *workload.Scratch) []workload.Call {
	wh := w.warehouseOf(user)
	k := 1 + r.IntN(w.browseMax)
	calls := []workload.Call{{Stmt: "category", Args: []any{wh, 1 + r.Int64N(Categories)}, Rows: -1}}
	for range k - 1 {
		calls = append(calls, workload.Call{Stmt: "product", Args: []any{wh, 1 + r.Int64N(Products)}, Rows: -1})
	}
	return calls
}

// browseOrders is a user looking at one of its customers' last five
// orders with their items.
func (w *Workload) browseOrders(user int, r *rand.Rand, _ *workload.Scratch) []workload.Call {
	c := w.customerOf(user, r)
	return []workload.Call{{Stmt: "customer", Args: []any{c}, Rows: -1}, {Stmt: "orders", Args: []any{c}, Rows: -1}}
}

// runCalls runs a batch's calls one by one (the statement-by-statement
// path): reads are read to the end, writes must change as many rows as
// the call says.
func (w *Workload) runCalls(batch func(int, *rand.Rand, *workload.Scratch) []workload.Call) func(context.Context, *workload.Tx, *rand.Rand) (int64, error) {
	return func(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
		s := step{w: w, ctx: ctx, tx: tx, r: r}
		var changed int64
		for _, c := range batch(tx.User, r, nil) {
			if c.Err != nil {
				return changed, c.Err
			}
			if stmts[c.Stmt].verb == selectVerb {
				if _, err := s.read(c.Stmt, c.Args...); err != nil {
					return changed, err
				}
				continue
			}
			if err := s.write(c.Rows, c.Stmt, c.Args...); err != nil {
				return changed, err
			}
			changed += c.Rows
		}
		return changed, nil
	}
}

// orderProducts is a customer of the user's ordering 2–6 products from
// the user's warehouse: a logon row, the customer's details (which
// decide the order's address, card and class), the order, then for each
// product (ascending) its price and stock (which decide the item's price,
// the order's total and whether the warehouse is restocked), the item
// and the inventory update, and last the order's total.
func (w *Workload) orderProducts(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
	s := step{w: w, ctx: ctx, tx: tx, r: r}
	c, wh := w.customerOf(tx.User, r), w.warehouseOf(tx.User)
	m := minItems + r.IntN(maxItems-minItems+1)
	picked := pickProducts(r, m)
	logon, err := w.keys.New(tx.User)
	if err != nil {
		return 0, err
	}
	id, err := w.keys.New(tx.User)
	if err != nil {
		return 0, err
	}
	at := now()
	if err := s.write(1, "ins_logon", logon, c, at); err != nil {
		return 0, err
	}
	var first, last, email, class, town, post string
	var credit any
	var addr, card int64
	if err := s.row("customer", []any{c}, &first, &last, &email, &credit, &class, &addr, &card, &town, &post); err != nil {
		return 1, err
	}
	if err := s.write(1, "ins_order", id, at, one(r, "direct", "online"), c, int64(0), money(0), int64(1+r.IntN(1000)), int64(1+r.IntN(100)),
		wh, one(r, "Standard", "Express", "Collection"), int64(1+r.IntN(5)), one(r, "ship_asap", "ship_when_ready"), addr, class, card, addr); err != nil {
		return 1, err
	}
	changed := int64(2)
	var total int64
	for i, p := range picked {
		want := int64(1 + r.IntN(5))
		var price float64
		var onHand int64
		if err := s.row("stock", []any{wh, p}, &price, &onHand); err != nil {
			return changed, err
		}
		cents := int64(price*100 + 0.5)
		total += cents * want
		if err := s.write(1, "ins_item", id, int64(i+1), p, money(cents), want, at.Add(24*time.Hour), nil,
			one(r, "None", "None", "None", "Gift Box", "Gift Wrap"), one(r, "New", "New", "New", "Refurbished"), int64(1+r.IntN(100)),
			at.Add(time.Duration(3+r.IntN(8))*24*time.Hour)); err != nil {
			return changed, err
		}
		delta := -want
		if onHand < want {
			delta = restock - want
		}
		if err := s.write(1, "take", delta, p, wh); err != nil {
			return changed + 1, err
		}
		changed += 2
	}
	if err := s.write(1, "total", money(total), id); err != nil {
		return changed, err
	}
	return changed + 1, nil
}

// processOrders is the user's warehouse dispatching: up to nine of its
// orders waiting (status 0–4), oldest first, are marked processed
// (status 5). Orders another user processed in between are left alone.
func (w *Workload) processOrders(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
	s := step{w: w, ctx: ctx, tx: tx, r: r}
	wh := w.warehouseOf(tx.User)
	if err := s.pause(); err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, "pending", wh)
	if err != nil {
		return 0, fmt.Errorf("pending orders of warehouse %d: %w", wh, err)
	}
	args := make([]any, 0, processBatch)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("pending orders of warehouse %d: %w", wh, err)
		}
		args = append(args, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("pending orders of warehouse %d: %w", wh, err)
	}
	if len(args) == 0 {
		return 0, nil
	}
	n := len(args)
	for len(args) < processBatch {
		args = append(args, int64(0)) // no order has id 0
	}
	if err := s.pause(); err != nil {
		return 0, err
	}
	res, err := tx.Exec(ctx, "process", args...)
	if err != nil {
		return 0, fmt.Errorf("process %d orders: %w", n, err)
	}
	changed, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("process %d orders: %w", n, err)
	}
	if changed > int64(n) {
		return changed, fmt.Errorf("process %d orders: %d rows changed", n, changed)
	}
	return changed, nil
}

// step runs one transaction's statements, pausing (delay) before each
// but the first.
type step struct {
	w   *Workload
	ctx context.Context
	tx  *workload.Tx
	r   *rand.Rand
	n   int
}

// pause waits the delay before every statement but the first.
func (s *step) pause() error {
	s.n++
	lo, hi := s.w.delayMin, s.w.delayMax
	if s.n == 1 || hi <= 0 {
		return nil
	}
	d := lo + time.Duration(s.r.Int64N(int64(hi-lo)+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// write runs a writing statement that must change want rows.
func (s *step) write(want int64, name string, args ...any) error {
	if err := s.pause(); err != nil {
		return err
	}
	res, err := s.tx.Exec(s.ctx, name, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if want >= 0 && n != want {
		return fmt.Errorf("%s: %d rows changed, want %d", name, n, want)
	}
	return nil
}

// row runs a query for its one row.
func (s *step) row(name string, args []any, dest ...any) error {
	if err := s.pause(); err != nil {
		return err
	}
	if err := s.tx.QueryRow(s.ctx, name, args...).Scan(dest...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s %v: no row", name, args)
		}
		return fmt.Errorf("%s %v: %w", name, args, err)
	}
	return nil
}

// read runs a query and reads every row; it returns how many there were.
func (s *step) read(name string, args ...any) (int, error) {
	if err := s.pause(); err != nil {
		return 0, err
	}
	rows, err := s.tx.Query(s.ctx, name, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, fmt.Errorf("%s: %w", name, err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}
