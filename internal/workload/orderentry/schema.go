package orderentry

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"replab/internal/engine"
)

// The schema is Swingbench's order entry (SOE) in its names and columns,
// trimmed of Oracle-only types: ten tables, every one with a primary key
// and none with a foreign key (so that partial replicas can take any
// subset), the indexes the transactions need.

// column is one column; typ is the same in both dialects except "ts", a
// timestamp to the second (PostgreSQL timestamp(0), MySQL datetime).
type column struct {
	name string
	typ  string
	null bool
}

func (c column) sqlType(dialect engine.Dialect) string {
	if c.typ == "ts" {
		if dialect == engine.MySQL {
			return "datetime"
		}
		return "timestamp(0)"
	}
	return c.typ
}

// table is one table and how its rows are made.
type table struct {
	name string
	cols []column
	pk   []string
	idx  [][]string // secondary indexes
	// owners is how many owners the table's rows belong to: customers,
	// products or warehouses.
	owners func(w *Workload) int64
	// count is how many rows owner id has; nil means one.
	count func(w *Workload, id int64) int
	// rows makes owner id's n rows from r, in the order of cols.
	rows func(g *gen, r *rand.Rand, id int64, n int) [][]any
	salt uint64 // names the table's streams
}

// create is the CREATE TABLE statement in dialect.
func (t *table) create(dialect engine.Dialect) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (", t.name)
	for _, c := range t.cols {
		b.WriteString(c.name + " " + c.sqlType(dialect))
		if !c.null {
			b.WriteString(" NOT NULL")
		}
		b.WriteString(", ")
	}
	fmt.Fprintf(&b, "PRIMARY KEY (%s))", strings.Join(t.pk, ", "))
	return b.String()
}

// indexes are the CREATE INDEX statements (the same in both dialects).
func (t *table) indexes() []string {
	var out []string
	for _, cols := range t.idx {
		out = append(out, fmt.Sprintf("CREATE INDEX %s_%s_ix ON %s (%s)", t.name, strings.Join(cols, "_"), t.name, strings.Join(cols, ", ")))
	}
	return out
}

// columns lists the column names.
func (t *table) columns() []string {
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.name
	}
	return names
}

// rowCount is how many rows Load puts in t.
func (t *table) rowCount(w *Workload) int64 {
	owners := t.owners(w)
	if t.count == nil {
		return owners
	}
	var n int64
	for id := int64(1); id <= owners; id++ {
		n += int64(t.count(w, id))
	}
	return n
}

func col(name, typ string) column     { return column{name: name, typ: typ} }
func nullCol(name, typ string) column { return column{name: name, typ: typ, null: true} }

func customers(w *Workload) int64       { return w.customers }
func products(*Workload) int64          { return Products }
func warehouseOwners(w *Workload) int64 { return w.Warehouses() }

// Per-customer row counts and loaded keys: customer c's addresses are
// 2(c-1)+1…, its logons and orders 3(c-1)+1…, its card c.
const (
	maxAddresses = 2
	maxLogons    = 3
	maxOrders    = 3
	minItems     = 2 // per order, loaded and ordered (Swingbench's 2–6)
	maxItems     = 6
)

var (
	saltAddresses = salt("addresses#count")
	saltLogons    = salt("logon#count")
	saltOrders    = salt("orders#count")
	saltItems     = salt("order_items#count")
	saltClass     = salt("customer_class")
	saltPrice     = salt("list_price")
	saltOrderRows = salt("orders")
)

func (w *Workload) addressCount(c int64) int { return w.between(saltAddresses, c, 1, maxAddresses) }
func (w *Workload) logonCount(c int64) int   { return w.between(saltLogons, c, 1, maxLogons) }
func (w *Workload) orderCount(c int64) int   { return w.between(saltOrders, c, 0, maxOrders) }

// itemCount is how many items loaded order j (0-based) of customer c has.
func (w *Workload) itemCount(c int64, j int) int {
	return w.between(saltItems, c*maxOrders+int64(j), minItems, maxItems)
}

func (w *Workload) itemRows(c int64) int {
	n := 0
	for j := range w.orderCount(c) {
		n += w.itemCount(c, j)
	}
	return n
}

func addressID(c int64, j int) int64 { return maxAddresses*(c-1) + int64(j) + 1 }
func logonID(c int64, j int) int64   { return maxLogons*(c-1) + int64(j) + 1 }
func orderID(c int64, j int) int64   { return maxOrders*(c-1) + int64(j) + 1 }

var (
	classes     = []string{"Occasional", "Regular", "Business", "Prime"}
	languages   = []string{"us", "us", "us", "fr", "de", "es", "it", "ja"}
	territories = map[string]string{"us": "AMERICA", "fr": "FRANCE", "de": "GERMANY", "es": "SPAIN", "it": "ITALY", "ja": "JAPAN"}
	countries   = []string{"United States of America", "United Kingdom", "France", "Germany", "Spain", "Italy", "Japan", "Canada"}
	cardTypes   = []string{"Visa (Debit)", "Visa (Credit)", "MasterCard", "American Express", "Discover"}
	statuses    = []string{"orderable", "orderable", "orderable", "planned", "development", "obsolete"}
)

// customerClass is customer c's class, shared by customers and orders.
func (w *Workload) customerClass(c int64) string {
	return classes[w.hash(saltClass, c)%uint64(len(classes))]
}

// price is product p's list price in cents (5.00 to 999.99).
func (w *Workload) price(p int64) int64 { return 500 + int64(w.hash(saltPrice, p)%99500) }

// category is product p's category, 1..Categories.
func category(p int64) int64 { return 1 + (p-1)%Categories }

// customerRow is a customers row; the loader and new_customer share it.
func customerRow(r *rand.Rand, id int64, class string, since time.Time, address, card int64) []any {
	first, last := name(r, 3, 12), name(r, 4, 14)
	lang := one(r, languages...)
	return []any{id, first, last, lang, territories[lang], money(int64(100+r.IntN(4901)) * 100),
		strings.ToLower(first+"."+last) + fmt.Sprintf("%d@example.com", id), int64(1 + r.IntN(1000)), since, class,
		one(r, "Electronics", "Books", "Garden", "Sports", "Music", "Toys"), dayIn(r, time.Date(1940, 1, 1, 0, 0, 0, 0, time.UTC), 65*365),
		one(r, "Y", "N"), one(r, "Y", "N"), address, card}
}

// addressRow is an addresses row.
func addressRow(r *rand.Rand, id, customer int64, created time.Time) []any {
	return []any{id, customer, created, int64(1 + r.IntN(999)), words(r, 1, 3, 60) + " Street", name(r, 4, 14),
		name(r, 4, 12) + "shire", one(r, countries...), code(r, letters, 2) + code(r, digits, 2) + " " + code(r, digits, 1) + code(r, letters, 2),
		code(r, digits, 5)}
}

// cardRow is a card_details row.
func cardRow(r *rand.Rand, id, customer int64, from time.Time) []any {
	return []any{id, customer, one(r, cardTypes...), int64(4000_0000_0000_0000 + r.Int64N(1_0000_0000_0000_0000-4000_0000_0000_0000)),
		dayIn(r, from, 5*365), "Y", int64(100 + r.IntN(900))}
}

// order is one loaded order with its items.
type order struct {
	row   []any
	items [][]any
}

// orders makes customer c's loaded orders, items and totals from r
// (seeded for (seed, "orders", c): both tables draw the same).
func (g *gen) orders(r *rand.Rand, c int64) []order {
	w := g.w
	n := w.orderCount(c)
	out := make([]order, n)
	at := secondsIn(r, today, 2*365)
	for j := range out {
		at = at.Add(time.Duration(r.Int64N(60*86400)) * time.Second)
		k := w.itemCount(c, j)
		picked := pickProducts(r, k)
		items := make([][]any, k)
		var total int64
		for i, p := range picked {
			cents, qty := w.price(p), int64(1+r.IntN(5))
			total += cents * qty
			var returned any
			if r.IntN(50) == 0 {
				returned = at.Add(time.Duration(10+r.IntN(20)) * 24 * time.Hour)
			}
			items[i] = []any{orderID(c, j), int64(i + 1), p, money(cents), qty, at.Add(time.Duration(1+r.IntN(5)) * 24 * time.Hour), returned,
				one(r, "None", "None", "None", "Gift Box", "Gift Wrap"), one(r, "New", "New", "New", "Refurbished"), int64(1 + r.IntN(100)),
				at.Add(time.Duration(3+r.IntN(8)) * 24 * time.Hour)}
		}
		status := int64(5 + r.IntN(6)) // processed …
		if r.IntN(10) == 0 {
			status = int64(r.IntN(5)) // … or waiting for process_orders
		}
		out[j] = order{items: items, row: []any{orderID(c, j), at, one(r, "direct", "online"), c, status, money(total),
			int64(1 + r.IntN(1000)), int64(1 + r.IntN(100)), 1 + r.Int64N(w.Warehouses()), one(r, "Standard", "Express", "Collection"),
			int64(1 + r.IntN(5)), one(r, "ship_asap", "ship_when_ready"), addressID(c, 0), w.customerClass(c), c, addressID(c, 0)}}
	}
	return out
}

// pickProducts is k distinct products, ascending (an order takes its
// inventory rows in product order, so two orders never deadlock).
func pickProducts(r *rand.Rand, k int) []int64 {
	out := make([]int64, 0, k)
	for len(out) < k {
		p := 1 + r.Int64N(Products)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// tables in load order.
var tables = []*table{
	{
		name: "warehouses", owners: warehouseOwners, salt: salt("warehouses"), pk: []string{"warehouse_id"},
		cols: []column{col("warehouse_id", "int"), col("warehouse_name", "varchar(35)"), col("location_id", "int")},
		rows: func(g *gen, r *rand.Rand, id int64, _ int) [][]any {
			return [][]any{{id, name(r, 4, 12) + " " + one(r, "Depot", "Warehouse", "Store"), int64(1000 + r.IntN(9000))}}
		},
	},
	{
		name: "product_information", owners: products, salt: salt("product_information"), pk: []string{"product_id"},
		idx: [][]string{{"category_id"}},
		cols: []column{col("product_id", "bigint"), col("product_name", "varchar(50)"), col("product_description", "varchar(2000)"),
			col("category_id", "int"), col("weight_class", "int"), col("supplier_id", "int"), col("product_status", "varchar(20)"),
			col("list_price", "numeric(8,2)"), col("min_price", "numeric(8,2)"), col("catalog_url", "varchar(50)")},
		rows: func(g *gen, r *rand.Rand, id int64, _ int) [][]any {
			cents := g.w.price(id)
			return [][]any{{id, words(r, 2, 4, 50), words(r, 20, 50, 400), category(id), int64(1 + r.IntN(5)), int64(1 + r.IntN(100)),
				one(r, statuses...), money(cents), money(cents * 8 / 10), "www." + strings.ToLower(name(r, 4, 12)) + ".example.com"}}
		},
	},
	{
		name: "product_descriptions", owners: products, salt: salt("product_descriptions"), pk: []string{"product_id", "language_id"},
		cols: []column{col("product_id", "bigint"), col("language_id", "varchar(3)"), col("translated_name", "varchar(50)"),
			col("translated_description", "varchar(2000)")},
		rows: func(g *gen, r *rand.Rand, id int64, _ int) [][]any {
			return [][]any{{id, "US", words(r, 2, 4, 50), words(r, 20, 50, 400)}}
		},
	},
	{
		name: "inventories", owners: products, salt: salt("inventories"), pk: []string{"product_id", "warehouse_id"},
		count: func(w *Workload, _ int64) int { return int(w.Warehouses()) },
		cols:  []column{col("product_id", "bigint"), col("warehouse_id", "int"), col("quantity_on_hand", "int")},
		rows: func(g *gen, r *rand.Rand, id int64, n int) [][]any {
			rows := make([][]any, n)
			for i := range rows {
				rows[i] = []any{id, int64(i + 1), int64(10 + r.IntN(991))}
			}
			return rows
		},
	},
	{
		name: "customers", owners: customers, salt: salt("customers"), pk: []string{"customer_id"},
		cols: []column{col("customer_id", "bigint"), col("cust_first_name", "varchar(40)"), col("cust_last_name", "varchar(40)"),
			col("nls_language", "varchar(3)"), col("nls_territory", "varchar(30)"), col("credit_limit", "numeric(9,2)"),
			col("cust_email", "varchar(100)"), col("account_mgr_id", "int"), col("customer_since", "date"), col("customer_class", "varchar(40)"),
			col("suggestions", "varchar(40)"), col("dob", "date"), col("mailshot", "varchar(1)"), col("partner_mailshot", "varchar(1)"),
			col("preferred_address", "bigint"), col("preferred_card", "bigint")},
		rows: func(g *gen, r *rand.Rand, id int64, _ int) [][]any {
			return [][]any{customerRow(r, id, g.w.customerClass(id), dayIn(r, today.AddDate(-10, 0, 0), 10*365), addressID(id, 0), id)}
		},
	},
	{
		name: "addresses", owners: customers, salt: salt("addresses"), pk: []string{"address_id"}, idx: [][]string{{"customer_id"}},
		count: (*Workload).addressCount,
		cols: []column{col("address_id", "bigint"), col("customer_id", "bigint"), col("date_created", "ts"), col("house_no", "int"),
			col("street_name", "varchar(60)"), col("town", "varchar(60)"), col("county", "varchar(60)"), col("country", "varchar(60)"),
			col("post_code", "varchar(12)"), col("zip_code", "varchar(12)")},
		rows: func(g *gen, r *rand.Rand, id int64, n int) [][]any {
			rows := make([][]any, n)
			for j := range rows {
				rows[j] = addressRow(r, addressID(id, j), id, secondsIn(r, today, 10*365))
			}
			return rows
		},
	},
	{
		name: "card_details", owners: customers, salt: salt("card_details"), pk: []string{"card_id"}, idx: [][]string{{"customer_id"}},
		cols: []column{col("card_id", "bigint"), col("customer_id", "bigint"), col("card_type", "varchar(30)"), col("card_number", "bigint"),
			col("expiry_date", "date"), col("is_valid", "varchar(1)"), col("security_code", "int")},
		rows: func(g *gen, r *rand.Rand, id int64, _ int) [][]any {
			return [][]any{cardRow(r, id, id, today)}
		},
	},
	{
		name: "logon", owners: customers, salt: salt("logon"), pk: []string{"logon_id"},
		count: (*Workload).logonCount,
		cols:  []column{col("logon_id", "bigint"), col("customer_id", "bigint"), col("logon_date", "ts")},
		rows: func(g *gen, r *rand.Rand, id int64, n int) [][]any {
			rows := make([][]any, n)
			for j := range rows {
				rows[j] = []any{logonID(id, j), id, secondsIn(r, today, 365)}
			}
			return rows
		},
	},
	{
		name: "orders", owners: customers, salt: saltOrderRows, pk: []string{"order_id"},
		idx:   [][]string{{"customer_id", "order_date"}, {"warehouse_id", "order_status"}},
		count: (*Workload).orderCount,
		cols: []column{col("order_id", "bigint"), col("order_date", "ts"), col("order_mode", "varchar(8)"), col("customer_id", "bigint"),
			col("order_status", "int"), col("order_total", "numeric(12,2)"), col("sales_rep_id", "int"), col("promotion_id", "int"),
			col("warehouse_id", "int"), col("delivery_type", "varchar(15)"), col("cost_of_delivery", "int"),
			col("wait_till_all_available", "varchar(15)"), col("delivery_address_id", "bigint"), col("customer_class", "varchar(30)"),
			col("card_id", "bigint"), col("invoice_address_id", "bigint")},
		rows: func(g *gen, r *rand.Rand, id int64, _ int) [][]any {
			var rows [][]any
			for _, o := range g.orders(r, id) {
				rows = append(rows, o.row)
			}
			return rows
		},
	},
	{
		name: "order_items", owners: customers, salt: saltOrderRows, pk: []string{"order_id", "line_item_id"},
		count: (*Workload).itemRows,
		cols: []column{col("order_id", "bigint"), col("line_item_id", "int"), col("product_id", "bigint"), col("unit_price", "numeric(8,2)"),
			col("quantity", "int"), col("dispatch_date", "ts"), nullCol("return_date", "ts"), col("gift_wrap", "varchar(20)"),
			col("item_condition", "varchar(20)"), col("supplier_id", "int"), col("estimated_delivery", "ts")},
		rows: func(g *gen, r *rand.Rand, id int64, _ int) [][]any {
			var rows [][]any
			for _, o := range g.orders(r, id) {
				rows = append(rows, o.items...)
			}
			return rows
		},
	},
}
