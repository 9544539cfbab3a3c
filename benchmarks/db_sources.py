"""Data sources (issue 43): a big PostgreSQL table into the sandbox, and a wide catalog.

Starts a real PostgreSQL (Debian's binaries, `tests/support/postgres.py`) and a live
server on the scripted model, then, as a role that may only read:

- Load: a table of 10 M rows (`id bigint, amount double precision, label text, day
  date`, made with generate_series, vacuumed and analysed) read whole into the sandbox
  as a pandas DataFrame by `sql("big", "SELECT * FROM big")`, timed inside the run's
  own code (time.perf_counter around the call and `len(df)`, so no model, HTTP or run
  overhead counts). The baseline, in the same run and alternating with it: the fastest
  well-kept reader in one process, ADBC's PostgreSQL driver in this process
  (`cursor.execute`, `fetch_arrow_table().to_pandas()`), with its two parts shown
  apart. Best and median of `--repeats` each, after one untimed warm-up each. The
  server gets PYTHON_CODE_MAX_MEMORY=`--memory-mb` (6 GB), so the answer stays under
  the 40% a run's answer may take in memory before it lands as Parquet (the kind of
  object `sql()` returned is printed).
- Catalog: a second database of 500 tables (names like `sales_2024_q1`,
  `customers_eu`, `inventory_items`: 26 subjects by 20 periods, regions and kinds;
  3 to 6 columns each, 3 rows, foreign keys between subjects of the same variant)
  registered as a source: the registration (connect, account check, catalog with
  samples) and a refresh, against the same reads by the server's own reader in this
  process; `GET /api/data-sources/{id}` (median of `--list-repeats`) against the same
  request for the one-table source; then `pick_tables` in this process on the stored
  catalog (parsed from JSON each time, as a turn does) for three questions that each
  need one or two tables: how many tables the prompt would carry, whether the needed
  ones are among them, and the prompt's size against the whole catalog described.

    .venv/bin/python -m benchmarks.db_sources [--rows 10000000] [--tables 500] [--smoke]

`--smoke`: 20,000 rows, 30 tables, one repetition, to check that it runs (`make test`
does); it judges no goal.

Goals: the load within 1.5x of the in-process ADBC reader; the catalog listed in
under 2 s; the prompt carries at most the tables the question needs (MAX_PICKED = 6).
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import adbc_driver_postgresql.dbapi as adbc
import httpx
import psycopg

from backend.tools.data_sources.catalog import MAX_PICKED, Catalog, describe, pick_tables
from backend.tools.data_sources.postgres import PostgresSource
from backend.tools.data_sources.query import SourceAddress
from tests.support.live_server import LiveServer
from tests.support.postgres import PostgresServer, binaries, postgres

ROLE = "bench_reader"
SESSION = "db-sources"
LOAD = (
    "import time\n"
    "started = time.perf_counter()\n"
    "df = sql('big', 'SELECT * FROM big')\n"
    "rows = len(df) if type(df).__name__ == 'DataFrame' else df.shape[0]\n"
    "print('load_seconds', time.perf_counter() - started, 'rows', rows,"
    " 'kind', type(df).__name__)\n"
    "del df\n"
)
WARM_UP = "df = sql('big', 'SELECT * FROM big LIMIT 1000')\nprint(len(df))\ndel df\n"

# The catalog's tables: a subject's columns (besides `id`), by SQL type.
SUBJECTS: dict[str, dict[str, str]] = {
    "sales": {"sold_on": "date", "amount": "numeric(12,2)", "channel": "text", "region": "text"},
    "orders": {"customer_id": "bigint", "placed_on": "date", "status": "text",
               "total": "numeric(12,2)"},
    "order_lines": {"order_id": "bigint", "product_id": "bigint", "quantity": "integer",
                    "unit_price": "numeric(10,2)"},
    "customers": {"name": "text", "email": "text", "country": "text", "signed_up": "date",
                  "segment": "text"},
    "invoices": {"customer_id": "bigint", "issued_on": "date", "due_on": "date",
                 "amount": "numeric(12,2)", "paid": "boolean"},
    "payments": {"invoice_id": "bigint", "paid_on": "date", "amount": "numeric(12,2)",
                 "method": "text"},
    "refunds": {"order_id": "bigint", "refunded_on": "date", "amount": "numeric(12,2)",
                "reason": "text"},
    "shipments": {"order_id": "bigint", "shipped_on": "date", "carrier": "text",
                  "tracking_number": "text"},
    "inventory": {"product_id": "bigint", "warehouse_id": "bigint",
                  "quantity_on_hand": "integer", "reorder_level": "integer"},
    "products": {"name": "text", "category": "text", "list_price": "numeric(10,2)",
                 "launched_on": "date"},
    "suppliers": {"name": "text", "country": "text", "rating": "integer"},
    "warehouses": {"name": "text", "city": "text", "capacity": "integer"},
    "employees": {"full_name": "text", "department": "text", "hired_on": "date",
                  "salary": "numeric(12,2)"},
    "payroll": {"employee_id": "bigint", "period": "text", "gross_pay": "numeric(12,2)",
                "tax": "numeric(12,2)"},
    "timesheets": {"employee_id": "bigint", "work_date": "date", "hours": "numeric(5,2)"},
    "support_tickets": {"customer_id": "bigint", "opened_on": "date", "priority": "text",
                        "status": "text", "resolved_on": "date"},
    "web_sessions": {"visitor_id": "text", "started_at": "timestamp", "pages": "integer",
                     "referrer": "text"},
    "marketing_campaigns": {"name": "text", "channel": "text", "budget": "numeric(12,2)",
                            "starts_on": "date", "ends_on": "date"},
    "ad_clicks": {"campaign_id": "bigint", "clicked_at": "timestamp", "cost": "numeric(8,2)"},
    "budgets": {"department": "text", "fiscal_year": "integer", "amount": "numeric(14,2)"},
    "forecasts": {"metric": "text", "period": "text", "value": "double precision"},
    "ledger_entries": {"account": "text", "posted_on": "date", "debit": "numeric(14,2)",
                       "credit": "numeric(14,2)"},
    "contracts": {"customer_id": "bigint", "signed_on": "date", "value": "numeric(14,2)",
                  "term_months": "integer"},
    "leads": {"source": "text", "created_on": "date", "score": "integer",
              "converted": "boolean"},
    "subscriptions": {"customer_id": "bigint", "plan": "text", "started_on": "date",
                      "mrr": "numeric(10,2)"},
    "returns": {"order_id": "bigint", "returned_on": "date", "condition": "text"},
}  # fmt: skip
QUARTERS = [f"{year}_q{quarter}" for year in (2023, 2024) for quarter in range(1, 5)]
REGIONS = ["eu", "us", "apac", "latam"]
VARIANTS = [*QUARTERS, *REGIONS, "items", "archive", "daily", "monthly", "summary",
            "staging", "history", "snapshot"]  # fmt: skip
# A column that names another subject's id joins to it, in the same variant.
JOINS = {
    "customer_id": "customers",
    "order_id": "orders",
    "product_id": "products",
    "warehouse_id": "warehouses",
    "invoice_id": "invoices",
    "employee_id": "employees",
    "campaign_id": "marketing_campaigns",
}
VALUES = {
    "text": "'{column}-' || g",
    "date": "DATE '2024-01-01' + g",
    "timestamp": "TIMESTAMP '2024-01-01' + g * INTERVAL '1 hour'",
    "integer": "g",
    "bigint": "g",
    "boolean": "g % 2 = 0",
    "double precision": "g * 1.5",
}
# Questions that each need one or two tables: (question, the tables it needs).
QUESTIONS: list[tuple[str, set[str]]] = [
    ("What was the total amount of sales_2024_q1 by channel?", {"sales_2024_q1"}),
    (
        "How many support tickets did each EU customer open, by priority?",
        {"support_tickets_eu", "customers_eu"},
    ),
    ("Which inventory items are below their reorder level?", {"inventory_items"}),
]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def best_and_median(samples: list[float]) -> str:
    return f"best {samples_text(min(samples))}, median {samples_text(statistics.median(samples))}"


def samples_text(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else ms(seconds)


def verdict(smoke: bool, goal: str, met: bool) -> str:
    """What a full run says of a goal; a smoke run judges none."""
    return "" if smoke else f"  (goal {goal}: {'met' if met else 'MISSED'})"


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


# PostgreSQL ---------------------------------------------------------------------------


def make_big(url: str, rows: int) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE big (id bigint, amount double precision, label text, day date)"
        )
        connection.execute(
            "INSERT INTO big SELECT i, (i * 7919 % 100000) / 100.0, 'customer-' || (i % 100003),"
            " DATE '2020-01-01' + (i % 1500)::integer"
            f" FROM generate_series(1::bigint, {rows}) AS i"
        )
        # Hint bits and the visibility map set now, so no reader pays for them.
        connection.execute("VACUUM (FREEZE, ANALYZE) big")


def table_names(count: int) -> list[str]:
    """`count` names, the questions' tables (and what they join to) among them."""
    names = [f"{subject}_{variant}" for variant in VARIANTS for subject in SUBJECTS]
    wanted = {name for _, needed in QUESTIONS for name in needed}
    wanted |= {"customers_2024_q1", "products_items", "warehouses_items"}
    ordered = sorted(wanted) + [name for name in names if name not in wanted]
    if count > len(ordered):
        raise SystemExit(f"--tables is at most {len(ordered)}")
    return ordered[:count]


def make_catalog(url: str, count: int) -> int:
    """`count` tables of 3 rows, and the foreign keys between them; returns the keys made."""
    names = table_names(count)
    made = set(names)
    creates, inserts, keys = [], [], []
    for name in names:
        subject, variant = next(
            (s, name[len(s) + 1 :]) for s in sorted(SUBJECTS, key=len, reverse=True)
            if name.startswith(s + "_")
        )  # fmt: skip
        columns = SUBJECTS[subject]
        definition = ", ".join(f"{column} {kind}" for column, kind in columns.items())
        creates.append(f"CREATE TABLE {name} (id bigint PRIMARY KEY, {definition});")
        values = ", ".join(
            VALUES.get(kind, "g * 1.25").format(column=column) for column, kind in columns.items()
        )
        inserts.append(f"INSERT INTO {name} SELECT g, {values} FROM generate_series(1, 3) g;")
        for column in columns:
            target = f"{JOINS[column]}_{variant}" if column in JOINS else ""
            if target in made:
                keys.append(f"ALTER TABLE {name} ADD FOREIGN KEY ({column}) REFERENCES {target};")
    with psycopg.connect(url) as connection:
        connection.execute("".join(creates + inserts + keys))
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("ANALYZE")
    return len(keys)


def grant_reader(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {ROLE}")


def as_reader(database: PostgresServer, url: str, password: str) -> dict[str, Any]:
    """The source's fields, for the read-only role."""
    return {
        "kind": "postgresql",
        "host": database.host,
        "port": database.port,
        "database": urlparse(url).path.lstrip("/"),
        "username": ROLE,
        "password": password,
    }


def reader_url(fields: dict[str, Any]) -> str:
    return (
        f"postgresql://{fields['username']}:{fields['password']}@{fields['host']}:"
        f"{fields['port']}/{fields['database']}"
    )


# The load --------------------------------------------------------------------------------


class Baseline:
    """ADBC's PostgreSQL driver in this process, one connection kept open (as the
    server keeps its own)."""

    def __init__(self, url: str) -> None:
        self.connection = adbc.connect(url)
        self.parts: list[tuple[float, float]] = []  # (fetch, to_pandas) per load
        self.arrow_bytes = 0

    def load(self, sql: str = "SELECT * FROM big") -> int:
        started = time.perf_counter()
        with self.connection.cursor() as cursor:
            cursor.execute(sql)
            table = cursor.fetch_arrow_table()
            fetched = time.perf_counter()
            frame = table.to_pandas()
            rows = len(frame)
        self.parts.append((fetched - started, time.perf_counter() - fetched))
        self.arrow_bytes = table.nbytes
        self.connection.rollback()
        return rows

    def close(self) -> None:
        self.connection.close()


def run_code(client: httpx.Client, code: str) -> tuple[str, float]:
    """The run's stdout and the request's wall time; a failed run stops the benchmark."""
    started = time.perf_counter()
    response = client.post(
        "/api/tools/python_coder", json={"session_id": SESSION, "code": code, "timeout": 900}
    )
    wall = time.perf_counter() - started
    response.raise_for_status()
    result = response.json()
    if not result["success"]:
        raise RuntimeError(f"the run failed: {result.get('error')}\n{result['data']['stderr']}")
    return str(result["data"]["stdout"]), wall


def sandbox_load(client: httpx.Client, rows: int) -> tuple[float, float, str]:
    """Seconds inside the run, seconds of the whole request, and what `sql()` returned."""
    stdout, wall = run_code(client, LOAD)
    words = stdout.split()
    loaded = int(words[words.index("rows") + 1])
    if loaded != rows:
        raise RuntimeError(f"the sandbox loaded {loaded:,} rows, not {rows:,}:\n{stdout}")
    return float(words[words.index("load_seconds") + 1]), wall, words[words.index("kind") + 1]


def measure_load(
    args: argparse.Namespace, client: httpx.Client, baseline: Baseline, rows: int
) -> None:
    baseline.load("SELECT * FROM big LIMIT 1000")  # connected, warmed; not timed
    baseline.parts.clear()
    run_code(client, WARM_UP)  # the sandbox started, pyarrow imported; not timed
    ours: list[float] = []
    walls: list[float] = []
    theirs: list[float] = []
    kinds = set()
    for _ in range(args.repeats):  # alternating, so drift reaches both alike
        theirs.append(timed(lambda: baseline.load()))
        seconds, wall, kind = sandbox_load(client, rows)
        ours.append(seconds)
        walls.append(wall)
        kinds.add(kind)
    mb = baseline.arrow_bytes / 1024**2
    spill = args.memory_mb * 0.4
    print(f"Load of {rows:,} rows ({mb:.0f} MB as Arrow; a run's answer spills to Parquet "
          f"past {spill:.0f} MB), {args.repeats} each:")  # fmt: skip
    print(f"  baseline: ADBC in this process, fetch_arrow_table().to_pandas(): "
          f"{best_and_median(theirs)}")  # fmt: skip
    fetch = [part[0] for part in baseline.parts]
    convert = [part[1] for part in baseline.parts]
    print(f"    its parts: fetch_arrow_table {best_and_median(fetch)}; "
          f"to_pandas {best_and_median(convert)}")  # fmt: skip
    print(f"  sql() in the sandbox ({', '.join(sorted(kinds))}), timed in the run: "
          f"{best_and_median(ours)}")  # fmt: skip
    print(f"    the whole python_coder request: {best_and_median(walls)}")
    best, median = min(ours) / min(theirs), statistics.median(ours) / statistics.median(theirs)
    judged = verdict(args.smoke, "1.5x", best <= 1.5)
    print(f"  ratio sandbox / baseline: best {best:.2f}x, median {median:.2f}x{judged}")
    for label, seconds in (("sandbox", min(ours)), ("baseline", min(theirs))):
        print(f"  {label}: {rows / seconds / 1e6:.2f} M rows/s, {mb / seconds:.0f} MB/s of Arrow")


# The catalog -------------------------------------------------------------------------------


def stored_catalog(detail: dict[str, Any]) -> str:
    """The catalog as the server stores it (the API adds notes to each table and column)."""
    tables = [
        {
            "name": table["name"],
            "kind": table["kind"],
            "rows": table["rows"],
            "columns": [
                {key: column[key] for key in ("name", "type", "key", "references", "samples")}
                for column in table["columns"]
            ],
        }
        for table in detail["catalog"]
    ]
    return json.dumps({"tables": tables})


def read_in_process(fields: dict[str, Any]) -> int:
    """What registering reads, by the server's own reader in this process: the account
    check, the catalog and each table's samples. Returns the tables read."""
    source = PostgresSource(
        SourceAddress(
            kind="postgresql",
            host=fields["host"],
            port=fields["port"],
            database=fields["database"],
            username=fields["username"],
            password=fields["password"],
        )
    )
    try:
        source.check_account()
        catalog = source.catalog(2000)
        tables = [source.samples(table, 10) for table in catalog.tables]
    finally:
        source.close()
    return len(tables)


def measure_catalog(
    args: argparse.Namespace, client: httpx.Client, fields: dict[str, Any], small_id: str
) -> None:
    read_in_process(fields)  # the database's caches warm for both; not timed
    in_process = timed(lambda: read_in_process(fields))
    started = time.perf_counter()
    made = client.post("/api/data-sources", json={"name": "wide", **fields})
    registered = time.perf_counter() - started
    if made.status_code != 201:
        raise RuntimeError(f"registering the wide source: {made.status_code} {made.text}")
    source = made.json()
    refreshed = timed(
        lambda: client.post(f"/api/data-sources/{source['id']}/refresh").raise_for_status()
    )
    tables = len(source["catalog"])
    keys = sum(bool(c["references"]) for t in source["catalog"] for c in t["columns"])
    sampled = sum(any(c["samples"] for c in t["columns"]) for t in source["catalog"])
    print(f"Catalog of {tables} tables ({keys} foreign keys, {sampled} tables with samples):")
    print(f"  registration (connect, account check, catalog, samples): {samples_text(registered)}"
          f" ({registered / in_process:.2f}x the same reads in this process, "
          f"{samples_text(in_process)}); a refresh {samples_text(refreshed)}")  # fmt: skip

    def listing(source_id: str) -> list[float]:
        samples = []
        for _ in range(args.list_repeats):
            started = time.perf_counter()
            client.get(f"/api/data-sources/{source_id}").raise_for_status()
            samples.append(time.perf_counter() - started)
        return samples

    listing(source["id"])  # warm
    wide = listing(source["id"])
    small = listing(small_id)
    detail = client.get(f"/api/data-sources/{source['id']}").raise_for_status()
    size = len(detail.content) / 1024
    median = statistics.median(wide)
    judged = verdict(args.smoke, "< 2 s", median < 2)
    print(f"  GET /api/data-sources/{{id}}: median {ms(median)}, max {ms(max(wide))} "
          f"({size:.0f} KiB; {median / statistics.median(small):.1f}x the one-table source's "
          f"{ms(statistics.median(small))}){judged}")  # fmt: skip

    text = stored_catalog(detail.json())
    parsed = Catalog.from_json(text)
    parses = [timed(lambda: Catalog.from_json(text)) for _ in range(args.pick_repeats)]
    whole = len(describe(parsed.tables, {}))
    print(f"  the stored catalog: {len(text) / 1024:.0f} KiB of JSON, parsed in "
          f"{ms(statistics.median(parses))}; described whole for a prompt: {whole:,} chars; "
          f"MAX_PICKED = {MAX_PICKED}")  # fmt: skip
    met = True
    for question, needed in QUESTIONS:
        picks: list[float] = []
        alone: list[float] = []
        picked: list[str] = []
        for _ in range(args.pick_repeats):
            started = time.perf_counter()
            chosen = pick_tables(Catalog.from_json(text), question, {})
            picks.append(time.perf_counter() - started)
            started = time.perf_counter()
            pick_tables(parsed, question, {})
            alone.append(time.perf_counter() - started)
            picked = [table.name for table in chosen]
        carried = len(describe([t for t in parsed.tables if t.name in picked], {}))
        found = needed <= set(picked)
        met = met and found and len(picked) <= len(needed)
        print(f"  {question!r}: needs {', '.join(sorted(needed))}")
        print(f"    picked {len(picked)} tables in {ms(statistics.median(picks))} with the JSON "
              f"parsed ({ms(statistics.median(alone))} without); needed among them: "
              f"{'yes' if found else 'NO'}; "
              f"{len(picked) - len(needed & set(picked))} extra; prompt {carried:,} chars "
              f"({carried / whole * 100:.1f}% of the whole catalog's)")  # fmt: skip
        print(f"    picked: {', '.join(picked) or '(none)'}")
    if not args.smoke:
        judged = "met" if met else "MISSED"
        print(f"  goal (the prompt carries the needed tables, and no more): {judged}")


# The run -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5, help="loads of each reader")
    parser.add_argument("--list-repeats", type=int, default=5)
    parser.add_argument("--pick-repeats", type=int, default=20)
    parser.add_argument("--memory-mb", type=int, default=6144, help="PYTHON_CODE_MAX_MEMORY")
    parser.add_argument("--smoke", action="store_true", help="small sizes, once, to check it runs")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.tables, args.repeats, args.list_repeats, args.pick_repeats = (
            20_000, 30, 1, 2, 2
        )  # fmt: skip
    bindir = binaries()
    if bindir is None:
        raise SystemExit("no PostgreSQL binaries (initdb, postgres): install Debian's postgresql")
    with postgres(bindir) as database, tempfile.TemporaryDirectory() as tmp:
        password = secrets.token_urlsafe(16)
        with psycopg.connect(database.url(), autocommit=True) as connection:
            connection.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{password}'")
        big_url, wide_url = database.new_database(), database.new_database()
        started = time.perf_counter()
        make_big(big_url, args.rows)
        print(f"PostgreSQL {bindir.parent.name}: table big, {args.rows:,} rows, made in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        started = time.perf_counter()
        keys = make_catalog(wide_url, args.tables)
        print(f"  a database of {args.tables} tables and {keys} foreign keys made in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        for url in (big_url, wide_url):
            grant_reader(url)
        big, wide = as_reader(database, big_url, password), as_reader(database, wide_url, password)
        measure_server(args, Path(tmp), big, wide)


def measure_server(
    args: argparse.Namespace, tmp: Path, big: dict[str, Any], wide: dict[str, Any]
) -> None:
    (tmp / "none.json").write_text("[]")
    server = LiveServer(
        tmp / "data",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=str(tmp / "none.json"),
        MODEL_PROBE="false",
        ADMIN_PASSWORD="benchmark-password",
        PYTHON_CODE_MAX_MEMORY=str(args.memory_mb),
        PYTHON_CODE_TIMEOUT="900",
        SOURCE_QUERY_MAX_MB="16384",
        WORK_LIMITS=json.dumps({"source_query": {"seconds": 600}}),
    )
    server.start()
    baseline = Baseline(reader_url(big))
    try:
        with server.client(timeout=1200) as client:
            made = client.post("/api/data-sources", json={"name": "big", **big})
            if made.status_code != 201:
                raise RuntimeError(f"registering big: {made.status_code} {made.text}")
            source_id = made.json()["id"]
            client.put(
                f"/api/sessions/{SESSION}/data-sources", json={"source_ids": [source_id]}
            ).raise_for_status()
            measure_load(args, client, baseline, args.rows)
            measure_catalog(args, client, wide, source_id)
    finally:
        baseline.close()
        server.stop()


if __name__ == "__main__":
    main()
