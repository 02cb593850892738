package orderentry

// Counts are statements by verb: per transaction of one type (expected
// values), or shares of all statements (Mix).
type Counts struct {
	Select, Insert, Update float64
}

// Total is every statement.
func (c Counts) Total() float64 { return c.Select + c.Insert + c.Update }

// Statements is the expected number of statements of each verb in one
// transaction of the named type, from its statements and how many times
// each runs:
//
//   - new_customer: 4 inserts (customer, address, card, logon), 1 select;
//   - browse_products: 1..browse_max selects, (1 + browse_max)/2 on average;
//   - order_products with m items (2..6, 4 on average): 1 + m selects
//     (customer, each item's stock), 2 + m inserts (logon, order, items),
//     1 + m updates (each inventory, the total);
//   - process_orders: 1 select, and 1 update when it finds an order
//     waiting (counted as always: a tenth of the loaded orders wait, and
//     with the default weights order_products adds 8 for every 9 that
//     process_orders can take);
//   - browse_orders: 2 selects (customer, orders with their items).
func (w *Workload) Statements(name string) Counts {
	m := float64(minItems+maxItems) / 2
	switch name {
	case NewCustomer:
		return Counts{Select: 1, Insert: 4}
	case BrowseProducts:
		return Counts{Select: float64(1+w.browseMax) / 2}
	case OrderProducts:
		return Counts{Select: 1 + m, Insert: 2 + m, Update: 1 + m}
	case ProcessOrders:
		return Counts{Select: 1, Update: 1}
	case BrowseOrders:
		return Counts{Select: 2}
	}
	return Counts{}
}

// Mix is the expected share of selects, inserts and updates among all
// statements, from the weights and Statements; with the defaults about
// 50 % / 30 % / 20 %, the storage study's mix.
func (w *Workload) Mix() Counts {
	var sum Counts
	for _, name := range typeNames {
		c, wt := w.Statements(name), float64(w.weights[name])
		sum.Select += wt * c.Select
		sum.Insert += wt * c.Insert
		sum.Update += wt * c.Update
	}
	t := sum.Total()
	if t == 0 {
		return Counts{}
	}
	return Counts{Select: sum.Select / t, Insert: sum.Insert / t, Update: sum.Update / t}
}
