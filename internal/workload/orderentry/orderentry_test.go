package orderentry

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/spec"
	"replab/internal/workload"
	"replab/internal/workload/gendata"
	"replab/internal/workload/workloadtest"
)

func build(t *testing.T, seed int, options string, dialect engine.Dialect) (*Workload, error) {
	t.Helper()
	w, err := workloadtest.Build(t, Factory, seed, options, dialect)
	if err != nil {
		return nil, err
	}
	return w.(*Workload), nil
}

func mustBuild(t *testing.T, seed int, options string, dialect engine.Dialect) *Workload {
	t.Helper()
	w, err := build(t, seed, options, dialect)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// buildUsers builds the workload for a spec whose [run] has users.
func buildUsers(t *testing.T, options string, users int) *Workload {
	t.Helper()
	text := strings.Replace(workloadtest.Spec(Factory.Kind, 1, options), "[run]\n", fmt.Sprintf("[run]\nusers = %d\n", users), 1)
	s, err := spec.Parse("unit.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workload.NewRegistry(Factory).For(s, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	return w.(*Workload)
}

// memLoader keeps what a Load sends.
type memLoader struct {
	rows  map[string][][]any
	cols  map[string][]string
	execs []string
}

func (m *memLoader) Copy(_ context.Context, table string, columns []string, src workload.RowSource) (int64, error) {
	if m.rows == nil {
		m.rows, m.cols = map[string][][]any{}, map[string][]string{}
	}
	m.cols[table] = columns
	var n int64
	for src.Next() {
		v, err := src.Values()
		if err != nil {
			return n, err
		}
		if len(v) != len(columns) {
			return n, fmt.Errorf("%s: %d values for %d columns", table, len(v), len(columns))
		}
		m.rows[table] = append(m.rows[table], v)
		n++
	}
	return n, src.Err()
}

func (m *memLoader) Close() error { return nil }

func (m *memLoader) Exec(_ context.Context, sql string) error {
	m.execs = append(m.execs, sql)
	return nil
}

func load(t *testing.T, w *Workload) (*memLoader, []int64) {
	t.Helper()
	var m memLoader
	var reports []int64
	if err := w.Load(context.Background(), &m, func(n int64) { reports = append(reports, n) }); err != nil {
		t.Fatal(err)
	}
	return &m, reports
}

// value is row[column] of table in m.
func (m *memLoader) value(table string, row []any, column string) any {
	for i, c := range m.cols[table] {
		if c == column {
			return row[i]
		}
	}
	panic("no column " + table + "." + column)
}

func TestLoadedRowsMatchTableRows(t *testing.T) {
	w := mustBuild(t, 1, "customers = 700", "postgres")
	m, reports := load(t, w)
	want := w.TableRows()
	if len(m.rows) != 10 || len(want) != 10 {
		t.Fatalf("loaded %d tables, TableRows has %d; want 10", len(m.rows), len(want))
	}
	var total int64
	for name, rows := range m.rows {
		if int64(len(rows)) != want[name] {
			t.Errorf("%s: loaded %d rows, TableRows says %d", name, len(rows), want[name])
		}
		total += int64(len(rows))
	}
	if total != w.TotalRows() {
		t.Errorf("loaded %d rows, TotalRows says %d", total, w.TotalRows())
	}
	for name, n := range map[string]int{"customers": 700, "card_details": 700, "warehouses": 7, "product_information": Products,
		"product_descriptions": Products, "inventories": 7 * Products} {
		if got := len(m.rows[name]); got != n {
			t.Errorf("%s has %d rows, want %d", name, got, n)
		}
	}
	if len(reports) == 0 || reports[len(reports)-1] != total {
		t.Errorf("last progress report %v, want %d", reports, total)
	}
	for i := 1; i < len(reports); i++ {
		if d := reports[i] - reports[i-1]; d <= 0 || d > gendata.ProgressEvery {
			t.Errorf("progress went from %d to %d", reports[i-1], reports[i])
		}
	}
	if len(m.execs) != 1 || !strings.HasPrefix(m.execs[0], "ANALYZE warehouses, product_information") {
		t.Errorf("after load ran %q, want one ANALYZE of every table", m.execs)
	}
}

// TestLoadedDataAgrees checks what the tables say about each other: keys
// are unique and below the inserted range, every reference finds its row,
// an order's total is the sum of its items at the products' list prices.
func TestLoadedDataAgrees(t *testing.T) {
	w := mustBuild(t, 3, "customers = 400", "postgres")
	m, _ := load(t, w)
	keys := map[string]map[string]bool{}
	for _, tb := range tables {
		seen := map[string]bool{}
		for _, row := range m.rows[tb.name] {
			var k []string
			for _, c := range tb.pk {
				v := m.value(tb.name, row, c)
				if id, ok := v.(int64); ok && id >= maxLoaded {
					t.Fatalf("%s.%s = %d: in the inserted keys' range", tb.name, c, id)
				}
				k = append(k, fmt.Sprint(v))
			}
			key := strings.Join(k, "/")
			if seen[key] {
				t.Fatalf("%s: key %s twice", tb.name, key)
			}
			seen[key] = true
		}
		keys[tb.name] = seen
	}
	has := func(table string, id any) bool { return keys[table][fmt.Sprint(id)] }
	for _, c := range m.rows["customers"] {
		if !has("addresses", m.value("customers", c, "preferred_address")) || !has("card_details", m.value("customers", c, "preferred_card")) {
			t.Fatalf("customer %v: preferred address or card missing", c[0])
		}
	}
	price := map[int64]float64{}
	for _, p := range m.rows["product_information"] {
		price[p[0].(int64)] = m.value("product_information", p, "list_price").(float64)
	}
	totals := map[int64]int64{}
	for _, it := range m.rows["order_items"] {
		o := it[0].(int64)
		p := m.value("order_items", it, "product_id").(int64)
		unit := m.value("order_items", it, "unit_price").(float64)
		if unit != price[p] {
			t.Fatalf("order %d: product %d at %v, list price %v", o, p, unit, price[p])
		}
		totals[o] += int64(math.Round(unit*100)) * m.value("order_items", it, "quantity").(int64)
	}
	waiting := 0
	for _, o := range m.rows["orders"] {
		id := o[0].(int64)
		if got := int64(math.Round(m.value("orders", o, "order_total").(float64) * 100)); got != totals[id] || got == 0 {
			t.Fatalf("order %d: total %d cents, items %d", id, got, totals[id])
		}
		if !has("customers", m.value("orders", o, "customer_id")) || !has("addresses", m.value("orders", o, "delivery_address_id")) {
			t.Fatalf("order %d: customer or address missing", id)
		}
		if wh := m.value("orders", o, "warehouse_id").(int64); wh < 1 || wh > w.Warehouses() {
			t.Fatalf("order %d: warehouse %d", id, wh)
		}
		if m.value("orders", o, "order_status").(int64) <= 4 {
			waiting++
		}
	}
	if len(totals) != len(m.rows["orders"]) {
		t.Errorf("%d orders have items, %d orders", len(totals), len(m.rows["orders"]))
	}
	// About a tenth of the orders wait for process_orders.
	if share := float64(waiting) / float64(len(m.rows["orders"])); share < 0.05 || share > 0.15 {
		t.Errorf("%.2f of the loaded orders wait, want about 0.1", share)
	}
}

func TestDataIsDeterministicFromTheSeed(t *testing.T) {
	a, _ := load(t, mustBuild(t, 42, "customers = 200", "postgres"))
	b, _ := load(t, mustBuild(t, 42, "customers = 200", "mysql"))
	c, _ := load(t, mustBuild(t, 43, "customers = 200", "postgres"))
	if !reflect.DeepEqual(a.rows, b.rows) {
		t.Error("same seed, different rows (the dialect must not matter)")
	}
	for _, table := range []string{"customers", "orders", "order_items", "inventories", "product_information"} {
		if reflect.DeepEqual(a.rows[table], c.rows[table]) {
			t.Errorf("%s: seeds 42 and 43 gave the same rows", table)
		}
	}
	// A customer is the same at any scale.
	d, _ := load(t, mustBuild(t, 42, "customers = 300", "postgres"))
	if !reflect.DeepEqual(a.rows["customers"][17], d.rows["customers"][17]) {
		t.Error("customer 18 differs between 200 and 300 customers")
	}
}

// TestScale pins the rows per customer and the derived sizes.
func TestScale(t *testing.T) {
	for _, tc := range []struct {
		customers  int64
		warehouses int64
	}{{1, 1}, {99, 1}, {5000, 50}, {100_000, 1000}, {1_000_000, 1000}} {
		t.Run(fmt.Sprintf("%d customers", tc.customers), func(t *testing.T) {
			if got := warehouses(tc.customers); got != tc.warehouses {
				t.Errorf("%d warehouses, want %d", got, tc.warehouses)
			}
		})
	}
	w := mustBuild(t, 1, "customers = 20000", "postgres")
	rows := w.TableRows()
	per := func(table string) float64 { return float64(rows[table]) / 20000 }
	for _, tc := range []struct {
		table  string
		lo, hi float64
	}{{"customers", 1, 1}, {"card_details", 1, 1}, {"addresses", 1.45, 1.55}, {"logon", 1.95, 2.05}, {"orders", 1.45, 1.55}, {"order_items", 5.8, 6.2}} {
		if got := per(tc.table); got < tc.lo || got > tc.hi {
			t.Errorf("%s: %.3f rows per customer, want %.2f..%.2f", tc.table, got, tc.lo, tc.hi)
		}
	}
	if rows["inventories"] != 200*Products {
		t.Errorf("inventories %d, want %d", rows["inventories"], 200*Products)
	}
	if got, want := w.DataBytes(), int64(fixedBytes+20000*bytesPerCustomer+200*Products*bytesPerInventory); got != want {
		t.Errorf("DataBytes %d, want %d", got, want)
	}
}

func TestMix(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options string
		want    Counts // shares, ± 0.015
	}{
		{"defaults give the study's 50/30/20", "", Counts{0.50, 0.30, 0.20}},
		{"browsing only", "weight_new_customer = 0\nweight_order_products = 0\nweight_process_orders = 0", Counts{1, 0, 0}},
		{"ordering only", "weight_new_customer = 0\nweight_browse_products = 0\nweight_process_orders = 0\nweight_browse_orders = 0", Counts{5.0 / 16, 6.0 / 16, 5.0 / 16}},
		{"Swingbench's 1-24 products a browse", "browse_max = 24", Counts{0.63, 0.22, 0.15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustBuild(t, 1, tc.options, "postgres").Mix()
			if math.Abs(got.Select-tc.want.Select) > 0.015 || math.Abs(got.Insert-tc.want.Insert) > 0.015 || math.Abs(got.Update-tc.want.Update) > 0.015 {
				t.Errorf("mix %.3f/%.3f/%.3f, want %.2f/%.2f/%.2f", got.Select, got.Insert, got.Update, tc.want.Select, tc.want.Insert, tc.want.Update)
			}
			if s := got.Total(); math.Abs(s-1) > 1e-9 {
				t.Errorf("shares add up to %v", s)
			}
		})
	}
}

// TestStatementsMatchTheTypes checks the counts Mix uses against the
// types' statement lists: every statement a type prepares is of a verb it
// counts, and it counts no verb it has no statement for.
func TestStatementsMatchTheTypes(t *testing.T) {
	w := mustBuild(t, 1, "", "postgres")
	for _, typ := range w.Transactions() {
		var has [3]bool
		for _, s := range typ.Statements {
			has[stmts[s.Name].verb] = true
		}
		c := w.Statements(typ.Name)
		for v, n := range []float64{c.Select, c.Insert, c.Update} {
			if has[v] != (n > 0) {
				t.Errorf("%s: verb %d: statements %t, counted %v", typ.Name, v, has[v], n)
			}
		}
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options string
		err     string // a part of the error; "" for none
	}{
		{"defaults", "", ""},
		{"every option", "customers = 100\nwarehouses = 3\nbrowse_max = 24\nweight_new_customer = 1\nweight_browse_products = 2\nweight_order_products = 3\nweight_process_orders = 4\nweight_browse_orders = 5\nreads_at = \"replica\"\ndelay = \"1ms..5ms\"", ""},
		{"no customers", "customers = 0", "workload.customers: want a whole number from 1 to 50000000"},
		{"no warehouses", "warehouses = 0", "workload.warehouses: want a whole number from 1 to 10000"},
		{"too many products a browse", "browse_max = 101", "workload.browse_max: want a whole number from 1 to 100"},
		{"negative weight", "weight_order_products = -1", "workload.weight_order_products: want a whole number from 0 to 1000"},
		{"all weights 0", "weight_new_customer = 0\nweight_browse_products = 0\nweight_order_products = 0\nweight_process_orders = 0\nweight_browse_orders = 0", "every weight_* is 0"},
		{"reads elsewhere", `reads_at = "standby"`, "workload.reads_at"},
		{"delay without unit", `delay = "10"`, `want a duration like "20ms" or a range like "10ms..50ms"`},
		{"delay backwards", `delay = "50ms..10ms"`, "the range's end is before its start"},
		{"delay too long", `delay = "2m"`, "at most 1m0s"},
		{"misspelt option", "customer = 10", "unknown option for workload order-entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(t, 1, tc.options, "postgres")
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("no error, want %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("error %q, want it to contain %q", err, tc.err)
			}
		})
	}
	if _, err := build(t, 1, "", ""); err == nil || !strings.Contains(err.Error(), "no SQL") {
		t.Errorf("without a dialect: %v", err)
	}
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		in     string
		lo, hi time.Duration
		bad    bool
	}{
		{"20ms", 20 * time.Millisecond, 20 * time.Millisecond, false},
		{"10ms..50ms", 10 * time.Millisecond, 50 * time.Millisecond, false},
		{" 0s .. 1s ", 0, time.Second, false},
		{"1s..", 0, 0, true},
		{"-1ms", 0, 0, true},
		{"1m1s", 0, 0, true},
	} {
		lo, hi, msg := parseRange(tc.in)
		if (msg != "") != tc.bad || !tc.bad && (lo != tc.lo || hi != tc.hi) {
			t.Errorf("parseRange(%q) = %v, %v, %q", tc.in, lo, hi, msg)
		}
	}
}

func TestTransactionTypes(t *testing.T) {
	w := mustBuild(t, 1, `reads_at = "replica"`, "postgres")
	types := w.Transactions()
	want := []struct {
		name      string
		weight    int
		readOnly  bool
		pipelined bool
	}{{NewCustomer, 15, false, true}, {BrowseProducts, 50, true, true}, {OrderProducts, 40, false, false}, {ProcessOrders, 5, false, false}, {BrowseOrders, 5, true, true}}
	if len(types) != len(want) {
		t.Fatalf("%d types, want %d", len(types), len(want))
	}
	for i, tc := range want {
		typ := types[i]
		if typ.Name != tc.name || typ.Weight != tc.weight || typ.ReadOnly != tc.readOnly || (typ.Batch != nil) != tc.pipelined || typ.Run == nil {
			t.Errorf("type %d: %s weight %d read-only %t batch %t; want %+v", i, typ.Name, typ.Weight, typ.ReadOnly, typ.Batch != nil, tc)
		}
		if at := typ.At; tc.readOnly != (at == workload.AtReplica) {
			t.Errorf("%s runs at %q", typ.Name, at)
		}
	}
	// A delay cannot be pipelined; a weight of 0 leaves a type out.
	w = mustBuild(t, 1, "delay = \"1ms\"\nweight_process_orders = 0", "postgres")
	for _, typ := range w.Transactions() {
		if typ.Batch != nil || typ.Name == ProcessOrders {
			t.Errorf("%s: batch %t", typ.Name, typ.Batch != nil)
		}
	}
}

// TestStatementsInBothDialects: each statement numbers its parameters
// $1, $2, … once each, in order, so MySQL's ? stand for the same values.
func TestStatementsInBothDialects(t *testing.T) {
	num := regexp.MustCompile(`\$([0-9]+)`)
	for name, s := range stmts {
		if s.name != name {
			t.Errorf("%s: named %s", name, s.name)
		}
		ms := num.FindAllStringSubmatch(s.sql, -1)
		for i, m := range ms {
			if m[1] != fmt.Sprint(i+1) {
				t.Errorf("%s: parameter %d is $%s", name, i+1, m[1])
			}
		}
		my := s.in("mysql")
		if strings.Count(my, "?") != len(ms) || strings.Contains(my, "$") {
			t.Errorf("%s: MySQL form %q", name, my)
		}
	}
	for _, d := range []engine.Dialect{engine.Postgres, engine.MySQL} {
		w := mustBuild(t, 1, "", d)
		for _, tb := range w.Schema().Tables {
			ddl := tb.Create[d]
			if !strings.Contains(ddl, "PRIMARY KEY (") {
				t.Errorf("%s %s: no primary key: %s", d, tb.Name, ddl)
			}
			if d == "mysql" && strings.Contains(ddl, "timestamp") || d == "postgres" && strings.Contains(ddl, "datetime") {
				t.Errorf("%s %s: %s", d, tb.Name, ddl)
			}
		}
	}
}

func TestInsertedKeys(t *testing.T) {
	k := newKeys(12345)
	seen := map[int64]bool{}
	for user := range 50 {
		prev := int64(0)
		for range 100 {
			id, err := k.New(user)
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] || id <= prev || id < maxLoaded || Owner(id) != user {
				t.Fatalf("user %d: key %d (previous %d, owner %d)", user, id, prev, Owner(id))
			}
			seen[id], prev = true, id
		}
	}
	if Owner(3*MaxCustomers) != -1 {
		t.Error("a loaded key has an owner")
	}
	if _, err := k.New(1 << userBits); err == nil {
		t.Error("a user beyond the key range got a key")
	}
	// The epoch is never 0 (that range would start at user 0's keys 1…).
	if e := newKeys(1<<epochBits - 1).epoch; e == 0 || e >= 1<<epochBits {
		t.Errorf("epoch %d", e)
	}
	// Two Workloads (two runs) have different epochs, almost surely.
	a, b := mustBuild(t, 1, "", "postgres"), mustBuild(t, 1, "", "postgres")
	if a.keys.epoch == b.keys.epoch {
		t.Error("two workloads drew the same epoch")
	}
}

// TestUsersOwnTheirCustomers: with [run] users = U, user i acts for
// customers i+1, i+1+U, …, every customer has one user, and a user's
// warehouse is fixed.
func TestUsersOwnTheirCustomers(t *testing.T) {
	for _, tc := range []struct{ customers, users int }{{1000, 8}, {10, 10}, {5, 8}, {1003, 7}} {
		t.Run(fmt.Sprintf("%d customers %d users", tc.customers, tc.users), func(t *testing.T) {
			w := buildUsers(t, fmt.Sprintf("customers = %d", tc.customers), tc.users)
			owner := map[int64]int{}
			for u := range tc.users {
				r := rand.New(rand.NewPCG(uint64(u), 9))
				for range 20 * tc.customers {
					c := w.customerOf(u, r)
					if c < 1 || c > int64(tc.customers) {
						t.Fatalf("user %d: customer %d", u, c)
					}
					if o, ok := owner[c]; ok && o != u && tc.customers >= tc.users {
						t.Fatalf("customer %d: users %d and %d", c, o, u)
					}
					owner[c] = u
				}
			}
			if len(owner) != tc.customers {
				t.Errorf("%d customers used, want all %d", len(owner), tc.customers)
			}
			if wh := w.warehouseOf(3); wh != 1+3%w.Warehouses() {
				t.Errorf("user 3: warehouse %d", wh)
			}
		})
	}
}

// TestDelayPausesInsideTheTransaction: no pause before a transaction's
// first statement, a pause before the next, cut short when the run ends.
func TestDelayPausesInsideTheTransaction(t *testing.T) {
	w := mustBuild(t, 1, `delay = "1m"`, "postgres")
	ctx, cancel := context.WithCancel(context.Background())
	s := step{w: w, ctx: ctx, r: rand.New(rand.NewPCG(1, 2))}
	done := make(chan error, 1)
	go func() { done <- s.pause() }()
	if err := <-done; err != nil {
		t.Fatalf("first statement: %v", err)
	}
	go func() { done <- s.pause() }()
	select {
	case err := <-done:
		t.Fatalf("second statement did not wait: %v", err)
	default:
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("after the run ended: %v", err)
	}
	// Without a delay nothing is drawn from the user's stream.
	w = mustBuild(t, 1, "", "postgres")
	r := rand.New(rand.NewPCG(1, 2))
	s = step{w: w, ctx: context.Background(), r: r}
	for range 3 {
		if err := s.pause(); err != nil {
			t.Fatal(err)
		}
	}
	if r.Uint64() != rand.New(rand.NewPCG(1, 2)).Uint64() {
		t.Error("pauses of 0 drew from the stream")
	}
}
