"""The starter evaluation set: questions over data files it writes itself, with known answers.

`write_starter` writes six files into a folder and returns questions of seven kinds:
one-step aggregates, multi-step analyses, joins, dates, dirty values, an Excel workbook
with two sheets, and one CSV over `LARGE_FILE_BYTES` that the server hands to the code as a
DuckDB relation. Everything is seeded, so every call writes the same bytes and the same
answers. The answers are computed here from the generated rows (the large file's while its
chunks are written, so nothing loads it whole).
"""

from __future__ import annotations

import csv
import io
import random
import re
import statistics
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from backend.core.evals.questions import EvalQuestion, Expected
from backend.files.model import LARGE_FILE_BYTES

if TYPE_CHECKING:
    from openpyxl import Workbook  # type: ignore[import-untyped]

STARTER_SET_NAME = "Starter set"

SALES, STORES, EVENTS = "sales.csv", "stores.csv", "events.csv"
CUSTOMERS, INVENTORY, SENSOR_LOG = "customers_dirty.csv", "inventory.xlsx", "sensor_log.csv"

YEAR = 2024
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

PRODUCTS = (  # product, category, list price in cents
    ("Headphones", "Electronics", 5990), ("Keyboard", "Electronics", 3450),
    ("Monitor", "Electronics", 18900), ("Webcam", "Electronics", 4200),
    ("Coffee Beans", "Grocery", 1240), ("Olive Oil", "Grocery", 980),
    ("Green Tea", "Grocery", 625), ("Puzzle", "Toys", 1499),
    ("Robot Kit", "Toys", 7400), ("Board Game", "Toys", 2950),
    ("Garden Hose", "Garden", 2200), ("Plant Pot", "Garden", 875),
    ("Seed Pack", "Garden", 320),
)  # fmt: skip
STORE_ROWS = (  # store_id, city, region, opened
    ("ST01", "Lyon", "South", date(2011, 3, 14)),
    ("ST02", "Paris", "North", date(2016, 6, 1)),
    ("ST03", "Lille", "North", date(2009, 9, 21)),
    ("ST04", "Marseille", "South", date(2018, 2, 10)),
    ("ST05", "Lyon", "South", date(2020, 11, 5)),
    ("ST06", "Nantes", "West", date(2014, 4, 28)),
    ("ST07", "Bordeaux", "West", date(2017, 8, 19)),
    ("ST08", "Strasbourg", "East", date(2012, 5, 7)),
    ("ST09", "Paris", "North", date(2021, 1, 25)),
    ("ST10", "Nice", "South", date(2013, 10, 30)),
    ("ST11", "Dijon", "East", date(2019, 3, 3)),
    ("ST12", "Rennes", "West", date(2015, 7, 15)),
)

DIRTY_RULES = (
    "Some rows are exact duplicates of an earlier row: count each only once. Missing values "
    "are written as 'n/a', 'N/A', '-' or left empty."
)
SENSOR_ROW_BYTES = 32  # "2024-01-01 00:00:00,S07,21.5,48\n"
SENSOR_FILE_BYTES = LARGE_FILE_BYTES + 5 * 1024 * 1024  # just over: a DuckDB relation
SENSOR_CHUNK_ROWS = 1 << 18
SENSOR_COUNT = 20
SENSOR_DAY = date(YEAR, 1, 15)  # the day one question asks about
HOT_TENTHS = 300  # "above 30.0"
ZIP_TIME = (YEAR, 1, 1, 0, 0, 0)  # the workbook's fixed timestamps, for identical bytes

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Order:
    order_id: int
    day: date
    store_id: str
    product: str
    category: str
    units: int
    price_cents: int

    @property
    def revenue_cents(self) -> int:
        return self.units * self.price_cents


@dataclass(frozen=True)
class Event:
    user_id: str
    event_type: str
    at: datetime


@dataclass(frozen=True)
class Customer:
    customer_id: str
    segment: str  # clean: gold, silver or bronze
    city: str  # clean, title case
    spend_cents: int | None
    age: int | None


@dataclass(frozen=True)
class StockRow:
    sku: str
    warehouse: str
    quantity: int


@dataclass
class SensorStats:
    """What the sensor log's questions need, summed over its chunks as they are written."""

    hot: int = 0
    max_tenths: int = -1
    max_count: int = 0
    s07_tenths: int = 0
    s07_count: int = 0
    day_humidity: int = 0
    day_count: int = 0


def write_starter(folder: Path) -> list[EvalQuestion]:
    """Write the starter set's files into `folder` (which exists and is empty) and return its
    questions."""
    orders, events = _write_sales(folder), _write_events(folder)
    _write_stores(folder)
    customers, duplicates = _write_customers(folder)
    products, stock = _write_inventory(folder)
    sensors = _write_sensor_log(folder / SENSOR_LOG)
    return [
        *_aggregate_questions(orders, events),
        *_multi_step_questions(orders, events),
        *_join_questions(orders),
        *_date_questions(orders, events),
        *_dirty_questions(customers, duplicates),
        *_excel_questions(products, stock),
        *_large_questions(sensors),
    ]


# Helpers for questions and answers


def _q(
    id_: str, kind: str, question: str, files: Sequence[str], *expected: Expected, rules: str = ""
) -> EvalQuestion:
    return EvalQuestion(id_, question, tuple(files), expected, kind=kind, constraints=rules)


def _exact(name: str, value: object) -> Expected:
    return Expected(name, str(value))


def _rounded(name: str, value: float, places: int) -> Expected:
    return Expected(name, f"{value:.{places}f}", tolerance=10.0**-places)


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def _top(counts: Mapping[str, float]) -> str:
    """The key with the largest value; a tie would make the question ambiguous."""
    ranked = sorted(counts.items(), key=lambda item: item[1], reverse=True)
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        raise ValueError(f"tie for the top: {ranked[:2]}")
    return ranked[0][0]


def _sums(pairs: Iterable[tuple[str, float]]) -> dict[str, float]:
    totals: defaultdict[str, float] = defaultdict(float)
    for key, value in pairs:
        totals[key] += value
    return dict(totals)


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


# The small files


def _random_day(rng: random.Random) -> date:
    return date(YEAR, 1, 1) + timedelta(days=rng.randrange(366))


def _write_sales(folder: Path) -> list[Order]:
    rng = random.Random(20240101)
    store_weights = [rng.randint(2, 9) for _ in STORE_ROWS]
    orders = []
    for order_id in range(1001, 1702):  # 701 orders: an odd count has a single median
        product, category, list_price = rng.choice(PRODUCTS)
        store = rng.choices(STORE_ROWS, weights=store_weights)[0][0]
        units = rng.choices(range(1, 11), weights=[9, 8, 7, 6, 5, 4, 3, 2, 2, 1])[0]
        price = round(list_price * rng.uniform(0.9, 1.1))
        orders.append(Order(order_id, _random_day(rng), store, product, category, units, price))
    rows = [
        (o.order_id, o.day.isoformat(), o.store_id, o.product, o.category, o.units,
         _money(o.price_cents))
        for o in orders
    ]  # fmt: skip
    header = ("order_id", "order_date", "store_id", "product", "category", "units", "unit_price")
    _write_csv(folder / SALES, header, rows)
    return orders


def _write_stores(folder: Path) -> None:
    rng = random.Random(12)
    rows = [(s, c, r, o.isoformat(), rng.randrange(300, 1500, 10)) for s, c, r, o in STORE_ROWS]
    _write_csv(folder / STORES, ("store_id", "city", "region", "opened", "floor_area_m2"), rows)


def _write_events(folder: Path) -> list[Event]:
    rng = random.Random(8)
    month_weights = [5, 4, 6, 6, 7, 8, 9, 8, 6, 7, 10, 12]
    events = []
    for _ in range(900):
        month = rng.choices(range(1, 13), weights=month_weights)[0]
        first = date(YEAR, month, 1)
        last = date(YEAR + (month == 12), month % 12 + 1, 1) - timedelta(days=1)
        day = first + timedelta(days=rng.randrange((last - first).days + 1))
        at = datetime(day.year, day.month, day.day) + timedelta(seconds=rng.randrange(86400))
        kind = rng.choices(("view", "add_to_cart", "purchase"), weights=(60, 25, 15))[0]
        events.append(Event(f"U{rng.randint(1, 60):03d}", kind, at))
    events.sort(key=lambda e: e.at)
    rows = [
        (i, e.user_id, e.event_type, e.at.strftime("%Y-%m-%d %H:%M:%S"))
        for i, e in enumerate(events, 1)
    ]
    _write_csv(folder / EVENTS, ("event_id", "user_id", "event_type", "timestamp"), rows)
    return events


def _messy_word(rng: random.Random, word: str) -> str:
    return rng.choice(
        (word, word.lower(), word.upper(), f" {word}", f"{word} ", f" {word.upper()}")
    )


def _messy_spend(rng: random.Random, cents: int | None) -> str:
    if cents is None:
        return rng.choice(("n/a", "N/A", "-", ""))
    amount = cents / 100
    return rng.choice(
        (
            f"${amount:,.2f}",
            f"{amount:,.2f}",
            f"{amount:.2f}",
            f" ${amount:,.2f} ",
            f"{amount:.2f} ",
        )
    )


def _messy_age(rng: random.Random, age: int | None) -> str:
    if age is None:
        return rng.choice(("n/a", "N/A", "-", ""))
    return rng.choice((str(age), str(age), f" {age}", f"{age} "))


def _write_customers(folder: Path) -> tuple[list[Customer], int]:
    """customers_dirty.csv, and the number of duplicate rows in it."""
    rng = random.Random(99)
    cities = ("Paris", "Berlin", "Madrid", "Rome", "Vienna")
    customers = []
    for number in range(1, 157):
        segment = rng.choices(("gold", "silver", "bronze"), weights=(2, 3, 5))[0]
        spend = None if rng.random() < 0.12 else rng.randint(20_000, 980_000)
        age = None if rng.random() < 0.1 else rng.randint(18, 79)
        city = rng.choices(cities, weights=(5, 4, 3, 3, 2))[0]
        customers.append(Customer(f"C{number:04d}", segment, city, spend, age))
    rows = [
        [c.customer_id, _messy_word(rng, c.segment.title()), _messy_word(rng, c.city),
         _messy_spend(rng, c.spend_cents), _messy_age(rng, c.age)]
        for c in customers
    ]  # fmt: skip
    for row in rng.sample(rows, 13):  # exact copies, each placed after its original
        rows.insert(rng.randint(rows.index(row) + 1, len(rows)), list(row))
    _write_csv(folder / CUSTOMERS, ("customer_id", "segment", "city", "annual_spend", "age"), rows)
    return customers, len(rows) - len(customers)


def _write_inventory(folder: Path) -> tuple[dict[str, tuple[str, int]], list[StockRow]]:
    """inventory.xlsx: sheet Products (sku, product_name, category, unit_cost), sheet Stock
    (sku, warehouse, quantity). Returns each sku's (category, cost in cents) and the stock."""
    from openpyxl import Workbook  # here: only writing a starter set needs it, not the server

    rng = random.Random(31)
    categories = ("Tools", "Paint", "Electrical", "Plumbing")
    nouns = ("Drill", "Brush", "Cable", "Valve", "Saw", "Roller", "Switch", "Pipe", "Clamp")
    products: dict[str, tuple[str, int]] = {}
    book = Workbook()
    sheet = book.active
    sheet.title = "Products"
    sheet.append(["sku", "product_name", "category", "unit_cost"])
    for number in range(1, 41):
        sku, category, cost = f"SKU-{number:03d}", rng.choice(categories), rng.randint(250, 18_000)
        products[sku] = (category, cost)
        sheet.append([sku, f"{rng.choice(nouns)} {number}", category, cost / 100])
    stock = [
        StockRow(sku, warehouse, rng.randint(0, 500))
        for sku in products
        for warehouse in ("Berlin", "Madrid", "Warsaw")
        if rng.random() < 0.7
    ]
    sheet = book.create_sheet("Stock")
    sheet.append(["sku", "warehouse", "quantity"])
    for row in stock:
        sheet.append([row.sku, row.warehouse, row.quantity])
    book.properties.created = datetime(*ZIP_TIME)
    (folder / INVENTORY).write_bytes(_fixed_times(book))
    return products, stock


def _fixed_times(book: Workbook) -> bytes:
    """The workbook's bytes without the clock in them: openpyxl stamps the save time in
    docProps/core.xml and in every zip entry."""
    saved = io.BytesIO()
    book.save(saved)
    out = io.BytesIO()
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            content = src.read(info.filename)
            if info.filename == "docProps/core.xml":
                content = re.sub(
                    rb"(<dcterms:modified[^>]*>)[^<]*", rb"\g<1>2024-01-01T00:00:00Z", content
                )
            dst.writestr(
                zipfile.ZipInfo(info.filename, date_time=ZIP_TIME), content, zipfile.ZIP_DEFLATED
            )
    return out.getvalue()


# The large file: fixed-width rows built as byte matrices, a chunk at a time


def _write_sensor_log(path: Path) -> SensorStats:
    """sensor_log.csv: timestamp (one row a second from 2024-01-01), sensor_id (S01..S20),
    temperature (10.0..49.9), humidity (10..99); every row is 32 bytes."""
    rows = SENSOR_FILE_BYTES // SENSOR_ROW_BYTES + 1
    days = _day_prefixes(rows // 86400 + 1)
    rng = np.random.default_rng(2024)
    base_tenths = rng.integers(180, 260, SENSOR_COUNT)
    base_humidity = rng.integers(35, 70, SENSOR_COUNT)
    stats = SensorStats()
    with path.open("wb") as handle:
        handle.write(b"timestamp,sensor_id,temperature,humidity\n")
        for start in range(0, rows, SENSOR_CHUNK_ROWS):
            seconds = np.arange(start, min(start + SENSOR_CHUNK_ROWS, rows), dtype=np.int64)
            sensor = rng.integers(0, SENSOR_COUNT, seconds.size)
            noise = np.rint(rng.normal(0.0, 40.0, seconds.size)).astype(np.int64)
            tenths = np.clip(base_tenths[sensor] + noise, 100, 499)
            humidity = np.clip(base_humidity[sensor] + rng.integers(-20, 21, seconds.size), 10, 99)
            handle.write(_sensor_rows(days, seconds, sensor, tenths, humidity).tobytes())
            _count(stats, seconds, sensor, tenths, humidity)
    return stats


def _day_prefixes(count: int) -> U8:
    first = date(YEAR, 1, 1)
    text = "".join(f"{first + timedelta(days=d):%Y-%m-%d} " for d in range(count))
    return np.frombuffer(text.encode(), dtype=np.uint8).reshape(count, 11)


def _sensor_rows(days: U8, seconds: I64, sensor: I64, tenths: I64, humidity: I64) -> U8:
    rows = np.empty((seconds.size, SENSOR_ROW_BYTES), dtype=np.uint8)
    rows[:, :11] = days[seconds // 86400]
    clock = seconds % 86400
    for column, value in ((11, clock // 3600), (14, clock // 60 % 60), (17, clock % 60)):
        _digits(rows, column, value, 2)
    _digits(rows, 21, sensor + 1, 2)
    _digits(rows, 24, tenths // 10, 2)
    _digits(rows, 27, tenths % 10, 1)
    _digits(rows, 29, humidity, 2)
    for column, char in (
        (13, ":"),
        (16, ":"),
        (19, ","),
        (20, "S"),
        (23, ","),
        (26, "."),
        (28, ","),
    ):
        rows[:, column] = ord(char)
    rows[:, 31] = ord("\n")
    return rows


def _digits(rows: U8, column: int, value: I64, width: int) -> None:
    for place in range(width):
        rows[:, column + width - 1 - place] = ord("0") + value // 10**place % 10


def _count(stats: SensorStats, seconds: I64, sensor: I64, tenths: I64, humidity: I64) -> None:
    stats.hot += int(np.count_nonzero(tenths > HOT_TENTHS))
    top = int(tenths.max())
    if top > stats.max_tenths:
        stats.max_tenths, stats.max_count = top, 0
    if top == stats.max_tenths:
        stats.max_count += int(np.count_nonzero(tenths == top))
    s07 = sensor == 6
    stats.s07_tenths += int(tenths[s07].sum())
    stats.s07_count += int(np.count_nonzero(s07))
    on_day = seconds // 86400 == (SENSOR_DAY - date(YEAR, 1, 1)).days
    stats.day_humidity += int(humidity[on_day].sum())
    stats.day_count += int(np.count_nonzero(on_day))


# The questions, by kind


def _aggregate_questions(orders: list[Order], events: list[Event]) -> list[EvalQuestion]:
    prices = [o.price_cents / 100 for o in orders]
    by_category = Counter(o.category for o in orders)
    top = _top(by_category)
    kind, files = "aggregate", (SALES,)
    return [
        _q("s01", kind, "What is the mean of the unit_price column in sales.csv, over all rows?",
           files, _rounded("mean_unit_price", statistics.fmean(prices), 2),
           rules="Round to 2 decimals."),
        _q("s02", kind, "What is the total number of units sold in sales.csv (the sum of the "
           "units column)?", files, _exact("total_units", sum(o.units for o in orders))),
        _q("s03", kind, "In sales.csv, which category has the most orders (rows), and how many "
           "orders does it have?", files,
           _exact("category", top), _exact("orders", by_category[top])),
        _q("s04", kind, "What is the highest unit_price of any order in sales.csv?", files,
           _exact("max_unit_price", _money(max(o.price_cents for o in orders)))),
        _q("s05", kind, "What is the median of the unit_price column in sales.csv?", files,
           _rounded("median_unit_price", statistics.median(prices), 2),
           rules="Round to 2 decimals."),
        _q("s06", kind, "How many orders (rows) in sales.csv were placed at store ST05?", files,
           _exact("orders", sum(o.store_id == "ST05" for o in orders))),
        _q("s07", kind, "How many rows of events.csv have the event_type 'purchase'?",
           (EVENTS,), _exact("purchases", sum(e.event_type == "purchase" for e in events))),
    ]  # fmt: skip


def _multi_step_questions(orders: list[Order], events: list[Event]) -> list[EvalQuestion]:
    revenue = "Each order's revenue is units × unit_price."
    total = sum(o.revenue_cents for o in orders)
    electronics = sum(o.revenue_cents for o in orders if o.category == "Electronics")
    grocery = _sums((o.store_id, o.revenue_cents) for o in orders if o.category == "Grocery")
    largest = sorted((o.revenue_cents for o in orders), reverse=True)[:5]
    average = {
        c: statistics.fmean(o.revenue_cents for o in orders if o.category == c) / 100
        for c in {o.category for o in orders}
    }
    best = _top(average)
    big = Counter(o.product for o in orders if o.units >= 5)
    types = Counter(e.event_type for e in events)
    kind, files = "multi-step", (SALES,)
    return [
        _q("s08", kind, "In sales.csv, what percentage of total revenue comes from the "
           "Electronics category?", files,
           _rounded("electronics_share_pct", 100 * electronics / total, 2),
           rules=f"{revenue} Give a percentage between 0 and 100, rounded to 2 decimals."),
        _q("s09", kind, "Considering only the Grocery orders in sales.csv, which store_id has the "
           "highest total revenue?", files, _exact("store_id", _top(grocery)), rules=revenue),
        _q("s10", kind, "In sales.csv, what is the combined revenue of the 5 orders with the "
           "highest revenue?", files, _rounded("top5_revenue", sum(largest) / 100, 2),
           rules=f"{revenue} Round to 2 decimals."),
        _q("s11", kind, "In sales.csv, which category has the highest average revenue per order, "
           "and what is that average?", files,
           _exact("category", best), _rounded("average_revenue", average[best], 2),
           rules=f"{revenue} Round the average to 2 decimals."),
        _q("s12", kind, "Among the orders in sales.csv with at least 5 units, which product "
           "appears in the most orders?", files, _exact("product", _top(big))),
        _q("s13", kind, "In events.csv, what is the ratio of purchase events to view events "
           "(the number of purchases divided by the number of views)?", (EVENTS,),
           _rounded("purchase_view_ratio", types["purchase"] / types["view"], 3),
           rules="Round to 3 decimals."),
    ]  # fmt: skip


def _join_questions(orders: list[Order]) -> list[EvalQuestion]:
    store = {s: (city, region, opened) for s, city, region, opened in STORE_ROWS}
    region = _sums((store[o.store_id][1], o.revenue_cents / 100) for o in orders)
    top_region = _top(region)
    older = [o.units for o in orders if store[o.store_id][2] < date(2015, 1, 1)]
    toys = _sums((store[o.store_id][0], o.units) for o in orders if o.category == "Toys")
    kind, files = "join", (SALES, STORES)
    join = "Join sales.csv with stores.csv on store_id."
    return [
        _q("s14", kind, "Which region has the highest total revenue, and what is that revenue?",
           files, _exact("region", top_region), _rounded("revenue", region[top_region], 2),
           rules=f"{join} Each order's revenue is units × unit_price. Round the revenue to "
           "2 decimals."),
        _q("s15", kind, "How many orders in sales.csv were placed at stores located in the city "
           "of Lyon?", files,
           _exact("orders", sum(store[o.store_id][0] == "Lyon" for o in orders)), rules=join),
        _q("s16", kind, "What is the mean number of units per order for orders placed at stores "
           "that opened before 2015-01-01?", files,
           _rounded("mean_units", statistics.fmean(older), 2),
           rules=f"{join} Use the opened column of stores.csv. Round to 2 decimals."),
        _q("s17", kind, "Which city's stores together sold the most units of the Toys "
           "category?", files, _exact("city", _top(toys)), rules=join),
    ]  # fmt: skip


def _date_questions(orders: list[Order], events: list[Event]) -> list[EvalQuestion]:
    months = Counter(MONTHS[e.at.month - 1] for e in events)
    weekdays = Counter(WEEKDAYS[e.at.weekday()] for e in events if e.event_type == "purchase")
    u007 = [e.at.date() for e in events if e.user_id == "U007"]
    q3 = sum(date(YEAR, 7, 1) <= e.at.date() <= date(YEAR, 9, 30) for e in events)
    weekend = sum(e.at.weekday() >= 5 for e in events)
    march = sum(o.units for o in orders if (o.day.year, o.day.month) == (YEAR, 3))
    kind, files = "dates", (EVENTS,)
    return [
        _q("s18", kind, "In events.csv, which month had the most events? Give the month's full "
           "English name.", files, _exact("month", _top(months))),
        _q("s19", kind, "In events.csv, on which day of the week did the most purchase events "
           "happen? Give the weekday's full English name.", files,
           _exact("weekday", _top(weekdays))),
        _q("s20", kind, "In events.csv, how many days lie between user U007's first event and "
           "their last event?", files, _exact("days", (max(u007) - min(u007)).days),
           rules="Use calendar dates only: the date of the last event minus the date of the "
           "first, in whole days."),
        _q("s21", kind, "How many events in events.csv happened in the third quarter of 2024 "
           "(1 July to 30 September, inclusive)?", files, _exact("events_q3", q3)),
        _q("s22", kind, "How many events in events.csv happened on a Saturday or a Sunday?",
           files, _exact("weekend_events", weekend)),
        _q("s23", kind, "How many units were sold in sales.csv in orders whose order_date is in "
           "March 2024?", (SALES,), _exact("units_march", march)),
    ]  # fmt: skip


def _dirty_questions(customers: list[Customer], duplicates: int) -> list[EvalQuestion]:
    spends = [c.spend_cents for c in customers if c.spend_cents is not None]
    silver = sum(c.spend_cents or 0 for c in customers if c.segment == "silver")
    ages = [c.age for c in customers if c.age is not None]
    money = (
        "annual_spend holds amounts written like '$1,234.50', '1234.50' or ' $980.00 ' "
        "(currency signs, thousands separators, stray spaces)."
    )
    labels = "segment and city values differ in case and stray spaces ('Gold', ' GOLD', 'gold ')."
    kind, files = "dirty", (CUSTOMERS,)
    return [
        _q("s24", kind, "How many distinct customers does customers_dirty.csv hold once exact "
           "duplicate rows are removed, and how many duplicate rows are removed?", files,
           _exact("customers", len(customers)),
           _exact("duplicates", duplicates), rules=DIRTY_RULES),
        _q("s25", kind, "What is the mean annual_spend of the customers in customers_dirty.csv, "
           "ignoring customers whose annual_spend is missing?", files,
           _rounded("mean_annual_spend", statistics.fmean(spends) / 100, 2),
           rules=f"{DIRTY_RULES} {money} Round to 2 decimals."),
        _q("s26", kind, "How many customers in customers_dirty.csv are in the gold segment?",
           files, _exact("gold_customers", sum(c.segment == "gold" for c in customers)),
           rules=f"{DIRTY_RULES} {labels}"),
        _q("s27", kind, "What is the total annual_spend of the customers in the silver segment "
           "of customers_dirty.csv?", files, _rounded("silver_spend", silver / 100, 2),
           rules=f"{DIRTY_RULES} {money} {labels} Missing amounts count as nothing. Round to "
           "2 decimals."),
        _q("s28", kind, "How many customers in customers_dirty.csv have a missing annual_spend?",
           files, _exact("missing_spend", len(customers) - len(spends)), rules=DIRTY_RULES),
        _q("s29", kind, "What is the median age of the customers in customers_dirty.csv, "
           "ignoring missing ages?", files,
           _rounded("median_age", statistics.median(ages), 1),
           rules=f"{DIRTY_RULES} Ages may have stray spaces. Round to 1 decimal."),
        _q("s30", kind, "Which city has the most customers in customers_dirty.csv? Give the name "
           "in title case, like 'Paris'.", files,
           _exact("city", _top(Counter(c.city for c in customers))),
           rules=f"{DIRTY_RULES} {labels}"),
    ]  # fmt: skip


def _excel_questions(
    products: dict[str, tuple[str, int]], stock: list[StockRow]
) -> list[EvalQuestion]:
    costs = [cost for _, cost in products.values()]
    warehouses = _sums((row.warehouse, row.quantity) for row in stock)
    top_warehouse = _top(warehouses)
    value = sum(row.quantity * products[row.sku][1] for row in stock)
    units = _sums((products[row.sku][0], row.quantity) for row in stock)
    both = "Join the 'Stock' sheet to the 'Products' sheet on sku."
    kind, files = "excel", (INVENTORY,)
    return [
        _q("s31", kind, "On the 'Products' sheet of inventory.xlsx, what is the mean unit_cost?",
           files, _rounded("mean_unit_cost", statistics.fmean(costs) / 100, 2),
           rules="Round to 2 decimals."),
        _q("s32", kind, "On the 'Stock' sheet of inventory.xlsx, what is the total quantity held "
           "in the Madrid warehouse?", files,
           _exact("madrid_quantity", int(warehouses["Madrid"]))),
        _q("s33", kind, "On the 'Stock' sheet of inventory.xlsx, which warehouse holds the most "
           "units in total, and how many?", files,
           _exact("warehouse", top_warehouse), _exact("units", int(warehouses[top_warehouse]))),
        _q("s34", kind, "In inventory.xlsx, what is the total value of all stock: quantity × "
           "unit_cost summed over every row of the 'Stock' sheet?", files,
           _rounded("stock_value", value / 100, 2), rules=f"{both} Round to 2 decimals."),
        _q("s35", kind, "In inventory.xlsx, which product category has the most units in stock "
           "over all warehouses?", files, _exact("category", _top(units)), rules=both),
    ]  # fmt: skip


def _large_questions(stats: SensorStats) -> list[EvalQuestion]:
    kind, files = "large", (SENSOR_LOG,)
    return [
        _q("s36", kind, "How many readings in sensor_log.csv have a temperature above 30.0 "
           "(strictly greater)?", files, _exact("hot_readings", stats.hot)),
        _q("s37", kind, "What is the mean temperature of sensor S07 in sensor_log.csv?", files,
           _rounded("mean_temperature", stats.s07_tenths / stats.s07_count / 10, 2),
           rules="Use the rows whose sensor_id is S07. Round to 2 decimals."),
        _q("s38", kind, "What is the highest temperature in sensor_log.csv, and how many "
           "readings have exactly that temperature?", files,
           _exact("max_temperature", f"{stats.max_tenths / 10:.1f}"),
           _exact("readings", stats.max_count)),
        _q("s39", kind, "What is the mean humidity of the readings in sensor_log.csv taken on "
           "2024-01-15?", files,
           _rounded("mean_humidity", stats.day_humidity / stats.day_count, 2),
           rules="Use the date part of the timestamp column. Round to 2 decimals."),
    ]  # fmt: skip
