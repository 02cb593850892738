package personnel

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The data model is the study's subset of the DIMHRS implementation data
// model: PER (Figure 2 of the paper, column for column) and the tables for
// a person's military affiliation it describes: organisation, skills,
// occupation, position, plus assignments, addresses, training, awards,
// grades and dependants, in DIMHRS's abbreviated naming (_nm name, _cd
// code, _dt date, _qy quantity, _txt text). Relationships are by id
// only, without foreign keys, so partial replicas can take any subset of
// tables, rows and columns.

// column is one column; the types are the same in PostgreSQL and MySQL.
type column struct {
	name string
	typ  string
	null bool
}

// table is one table and how its rows are made.
type table struct {
	name string
	cols []column
	pk   []string
	// owners is how many owners the table's rows belong to: persons, or
	// for a reference table its own rows.
	owners func(w *Workload) int64
	// count is how many rows owner id has; nil means one.
	count func(w *Workload, id int64) int
	// rows makes owner id's n rows, in the order of cols.
	rows rowsFunc
	salt uint64 // names the table's streams
}

// create is the CREATE TABLE statement (both dialects).
func (t *table) create() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (", t.name)
	for _, c := range t.cols {
		b.WriteString(c.name + " " + c.typ)
		if !c.null {
			b.WriteString(" NOT NULL")
		}
		b.WriteString(", ")
	}
	fmt.Fprintf(&b, "PRIMARY KEY (%s))", strings.Join(t.pk, ", "))
	return b.String()
}

// columns lists the column names.
func (t *table) columns() []string {
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.name
	}
	return names
}

func col(name, typ string) column     { return column{name: name, typ: typ} }
func nullCol(name, typ string) column { return column{name: name, typ: typ, null: true} }

// Reference table sizes.
func orgs(w *Workload) int64      { return 10 + w.persons/200 }
func skills(*Workload) int64      { return 150 }
func occupations(*Workload) int64 { return 80 }
func positions(w *Workload) int64 { return 20 + w.persons/20 }
func persons(w *Workload) int64   { return w.persons }

// rowsFunc makes owner id's n rows from r, the stream of (seed, table, id).
type rowsFunc func(g *gen, r *rand.Rand, id int64, n int) [][]any

// perTable is a per-person table with count(id) rows for person id.
func perTable(name string, count func(w *Workload, id int64) int, cols []column, pk []string, rows rowsFunc) *table {
	return &table{name: name, cols: cols, pk: pk, owners: persons, count: count, rows: rows, salt: salt(name)}
}

// few is lo..hi rows per person, drawn for each person from the seed.
func few(table string, lo, hi int) func(w *Workload, id int64) int {
	if lo == hi {
		return func(*Workload, int64) int { return lo }
	}
	s := salt(table + "#count")
	return func(w *Workload, id int64) int { return w.between(s, id, lo, hi) }
}

// refTable is a reference table with one row per id.
func refTable(name string, owners func(*Workload) int64, cols []column, row func(g *gen, r *rand.Rand, id int64) []any) *table {
	return &table{name: name, cols: cols, pk: []string{cols[0].name}, owners: owners, salt: salt(name),
		rows: func(g *gen, r *rand.Rand, id int64, _ int) [][]any { return [][]any{row(g, r, id)} }}
}

var (
	services   = []string{"A", "N", "F", "M", "C"} // army, navy, air force, marine corps, coast guard
	components = []string{"A", "G", "R"}           // active, guard, reserve
	countries  = []string{"US", "US", "US", "DE", "JP", "KR", "IT", "GB", "BH", "ES"}
	states     = []string{"VA", "TX", "CA", "NC", "GA", "FL", "WA", "CO", "HI", "MD"}
)

// tables in load order: reference tables, PER, then per-person tables.
var tables = []*table{
	refTable("org", orgs, []column{
		col("org_id", "bigint"),
		col("org_uic_cd", "char(6)"), // unit identification code
		col("org_nm", "varchar(60)"),
		nullCol("org_prnt_id", "bigint"),
		col("org_svc_cd", "char(1)"),
		col("org_cntry_cd", "char(2)"),
	}, func(g *gen, r *rand.Rand, id int64) []any {
		var parent any
		if id > 1 {
			parent = 1 + r.Int64N(id-1)
		}
		return []any{id, "W" + code(r, alnum, 5), words(r, 2, 4, 60), parent, one(r, services...), one(r, countries...)}
	}),
	refTable("skl", skills, []column{
		col("skl_id", "bigint"),
		col("skl_cd", "varchar(10)"),
		col("skl_nm", "varchar(60)"),
		col("skl_cat_cd", "char(1)"),
	}, func(g *gen, r *rand.Rand, id int64) []any {
		return []any{id, "S" + code(r, digits, 5), words(r, 1, 4, 60), code(r, letters[:8], 1)}
	}),
	refTable("ocptn", occupations, []column{
		col("ocptn_id", "bigint"),
		col("ocptn_cd", "varchar(10)"), // e.g. a military occupational specialty, 11B
		col("ocptn_nm", "varchar(60)"),
		col("ocptn_fld_cd", "varchar(4)"),
	}, func(g *gen, r *rand.Rand, id int64) []any {
		return []any{id, code(r, digits, 2) + code(r, letters, 1), words(r, 1, 4, 60), code(r, digits, 2)}
	}),
	refTable("pstn", positions, []column{
		col("pstn_id", "bigint"),
		col("org_id", "bigint"),
		col("ocptn_id", "bigint"),
		col("pstn_titl_txt", "varchar(60)"),
		col("pstn_grd_cd", "varchar(4)"),
		col("pstn_auth_qy", "int"),
	}, func(g *gen, r *rand.Rand, id int64) []any {
		return []any{id, 1 + r.Int64N(orgs(g.w)), 1 + r.Int64N(occupations(g.w)), words(r, 2, 5, 60), grade(one(r, "E", "E", "E", "O", "W"), 1+r.IntN(9)), int64(1 + r.IntN(5))}
	}),
	{
		name: "per", owners: persons, salt: salt("per"), pk: []string{"per_id"},
		cols: []column{
			col("per_id", "bigint"),
			col("per_last_nm", "varchar(50)"),
			col("per_frst_nm", "varchar(50)"),
			nullCol("per_mid_nm", "varchar(20)"),
			col("per_birth_clndr_dt", "date"),
			col("sex_cat_cd", "varchar(1)"),
			col("per_ethnic_affnty_cd", "varchar(1)"),
			col("per_adult_dpndnt_qy", "int"),
			col("per_mnr_dpndnt_qy", "int"),
			col("per_total_dpndnt_qy", "int"),
			col("per_dscrptn_text", "varchar(4000)"),
		},
		rows: func(g *gen, r *rand.Rand, id int64, _ int) [][]any {
			adult, minor := g.w.dependants(id)
			var mid any
			if r.IntN(10) < 8 {
				mid = name(r, 1, 12)
			}
			return [][]any{{id, name(r, 4, 14), name(r, 3, 12), mid, g.w.birth(id), one(r, "M", "M", "M", "F"),
				code(r, "ABCDEFGHX", 1), int64(adult), int64(minor), int64(adult + minor), Text(r, g.w.textBytes)}}
		},
	},
	perTable("per_org", few("per_org", 1, 1), []column{
		col("per_id", "bigint"),
		col("org_id", "bigint"),
		col("svc_cd", "char(1)"),
		col("cmpnt_cd", "char(1)"),
		col("eff_dt", "date"),
	}, []string{"per_id"}, func(g *gen, r *rand.Rand, id int64, _ int) [][]any {
		return [][]any{{id, 1 + r.Int64N(orgs(g.w)), one(r, services...), one(r, components...), dateIn(r, g.w.entry(id), today)}}
	}),
	perTable("per_skl", few("per_skl", 1, 3), []column{
		col("per_id", "bigint"),
		col("skl_id", "bigint"),
		col("prfcncy_cd", "char(1)"), // proficiency 1..5
		col("acqrd_dt", "date"),
	}, []string{"per_id", "skl_id"}, func(g *gen, r *rand.Rand, id int64, n int) [][]any {
		rows := make([][]any, 0, n)
		seen := map[int64]bool{}
		for len(rows) < n {
			s := 1 + r.Int64N(skills(g.w))
			if seen[s] {
				continue
			}
			seen[s] = true
			rows = append(rows, []any{id, s, code(r, "12345", 1), dateIn(r, g.w.entry(id), today)})
		}
		return rows
	}),
	perTable("per_ocptn", few("per_ocptn", 1, 2), []column{
		col("per_id", "bigint"),
		col("ocptn_seq", "int"),
		col("ocptn_id", "bigint"),
		col("prmry_ind", "char(1)"),
		col("eff_dt", "date"),
	}, []string{"per_id", "ocptn_seq"}, func(g *gen, r *rand.Rand, id int64, n int) [][]any {
		rows := make([][]any, n)
		for i := range rows {
			prmry := "N"
			if i == 0 {
				prmry = "Y"
			}
			rows[i] = []any{id, int64(i + 1), 1 + r.Int64N(occupations(g.w)), prmry, dateIn(r, g.w.entry(id), today)}
		}
		return rows
	}),
	perTable("per_asgmt", few("per_asgmt", 1, 3), []column{
		col("per_id", "bigint"),
		col("asgmt_seq", "int"),
		col("pstn_id", "bigint"),
		col("strt_dt", "date"),
		nullCol("end_dt", "date"),
	}, []string{"per_id", "asgmt_seq"}, func(g *gen, r *rand.Rand, id int64, n int) [][]any {
		dates := ascending(r, g.w.entry(id), n+1)
		rows := make([][]any, n)
		for i := range rows {
			var end any
			if i < n-1 {
				end = dates[i+1]
			}
			rows[i] = []any{id, int64(i + 1), 1 + r.Int64N(positions(g.w)), dates[i], end}
		}
		return rows
	}),
	perTable("per_addr", few("per_addr", 1, 2), []column{
		col("per_id", "bigint"),
		col("addr_seq", "int"),
		col("addr_type_cd", "char(1)"), // H home, M mailing
		col("line_txt", "varchar(80)"),
		col("city_nm", "varchar(40)"),
		col("st_cd", "char(2)"),
		col("pstl_cd", "varchar(10)"),
		col("cntry_cd", "char(2)"),
	}, []string{"per_id", "addr_seq"}, func(g *gen, r *rand.Rand, id int64, n int) [][]any {
		rows := make([][]any, n)
		for i := range rows {
			rows[i] = []any{id, int64(i + 1), []string{"H", "M"}[i%2], code(r, digits, 1+r.IntN(5)) + " " + words(r, 1, 3, 70),
				name(r, 4, 14), one(r, states...), code(r, digits, 5), one(r, countries...)}
		}
		return rows
	}),
	perTable("per_trng", few("per_trng", 1, 3), []column{
		col("per_id", "bigint"),
		col("trng_seq", "int"),
		col("crs_cd", "varchar(12)"),
		col("crs_nm", "varchar(60)"),
		col("cmpltn_dt", "date"),
		nullCol("score_qy", "int"),
	}, []string{"per_id", "trng_seq"}, func(g *gen, r *rand.Rand, id int64, n int) [][]any {
		dates := ascending(r, g.w.entry(id), n)
		rows := make([][]any, n)
		for i := range rows {
			rows[i] = []any{id, int64(i + 1), code(r, letters, 3) + "-" + code(r, digits, 4), words(r, 2, 5, 60), dates[i], int64(60 + r.IntN(41))}
		}
		return rows
	}),
	perTable("per_awd", few("per_awd", 0, 2), []column{
		col("per_id", "bigint"),
		col("awd_seq", "int"),
		col("awd_cd", "varchar(8)"),
		col("awd_dt", "date"),
		col("cttn_txt", "varchar(200)"), // citation
	}, []string{"per_id", "awd_seq"}, func(g *gen, r *rand.Rand, id int64, n int) [][]any {
		dates := ascending(r, g.w.entry(id), n)
		rows := make([][]any, n)
		for i := range rows {
			rows[i] = []any{id, int64(i + 1), code(r, letters, 4), dates[i], words(r, 8, 25, 200)}
		}
		return rows
	}),
	perTable("per_grd", few("per_grd", 1, 3), []column{
		col("per_id", "bigint"),
		col("grd_seq", "int"),
		col("grd_cd", "varchar(4)"), // pay grade: E1..E9, W1..W5, O1..O10
		col("eff_dt", "date"),
	}, []string{"per_id", "grd_seq"}, func(g *gen, r *rand.Rand, id int64, n int) [][]any {
		track := one(r, "E", "E", "E", "E", "E", "E", "O", "O", "O", "W")
		level := 1 + r.IntN(3)
		dates := ascending(r, g.w.entry(id), n)
		rows := make([][]any, n)
		for i := range rows {
			rows[i] = []any{id, int64(i + 1), grade(track, level), dates[i]}
			level += 1 + r.IntN(2)
		}
		return rows
	}),
	perTable("per_dpndnt", dependantRows, []column{
		col("per_id", "bigint"),
		col("dpndnt_seq", "int"),
		col("dpndnt_type_cd", "char(1)"), // A adult, M minor
		col("frst_nm", "varchar(50)"),
		col("birth_dt", "date"),
		col("rltnshp_cd", "char(1)"), // S spouse, P parent, C child
	}, []string{"per_id", "dpndnt_seq"}, func(g *gen, r *rand.Rand, id int64, n int) [][]any {
		adult, _ := g.w.dependants(id)
		birth := g.w.birth(id)
		rows := make([][]any, n)
		for i := range rows {
			typ, rel, born := "M", "C", dateIn(r, birth.AddDate(18, 0, 0), today)
			if i < adult {
				typ, rel, born = "A", "S", dateIn(r, birth.AddDate(-8, 0, 0), birth.AddDate(8, 0, 0))
				if i > 0 {
					rel, born = "P", dateIn(r, birth.AddDate(-45, 0, 0), birth.AddDate(-18, 0, 0))
				}
			}
			rows[i] = []any{id, int64(i + 1), typ, name(r, 3, 12), born, rel}
		}
		return rows
	}),
}

// dependantRows is PER's total dependants: PER_DPNDNT agrees with PER.
func dependantRows(w *Workload, id int64) int {
	a, m := w.dependants(id)
	return a + m
}

// grade is a pay grade code on a track, capped at the track's top.
func grade(track string, level int) string {
	top := map[string]int{"E": 9, "W": 5, "O": 10}[track]
	return fmt.Sprintf("%s%d", track, min(level, top))
}

// ascending is n dates from start to today, in order.
func ascending(r *rand.Rand, start time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	d := start
	for i := range out {
		d = dateIn(r, d, d.AddDate(4, 0, 0))
		if d.After(today) {
			d = today
		}
		out[i] = d
	}
	return out
}
