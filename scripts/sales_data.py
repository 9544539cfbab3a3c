"""A realistic, deterministic sales file for the README's screenshot.

Two years of monthly sales of four products in four regions (384 rows), with each
region's own growth, a December peak and some noise; the same bytes on every run.
"""

from __future__ import annotations

import csv
import io
import math
import random

FILE_NAME = "monthly_sales_2023_2024.csv"
REGIONS = {"North": 0.04, "South": 0.19, "East": 0.09, "West": -0.03}  # growth per year
PRODUCTS = {
    "Laptop": (1180.0, 42),
    "Monitor": (265.0, 120),
    "Headset": (89.0, 310),
    "Dock": (149.0, 150),
}
REGION_SIZE = {"North": 1.15, "South": 0.85, "East": 1.0, "West": 0.95}


def sales_csv(seed: int = 2024) -> bytes:
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["month", "region", "product", "units", "unit_price", "revenue"])
    for year in (2023, 2024):
        for month in range(1, 13):
            december = 0.25 if month == 12 else 0.0
            season = 1 + 0.12 * math.sin((month - 3) / 12 * 2 * math.pi) + december
            for region, growth in REGIONS.items():
                trend = (1 + growth) ** ((year - 2023) + (month - 1) / 12)
                for product, (price, base_units) in PRODUCTS.items():
                    expected = base_units * REGION_SIZE[region] * season * trend
                    units = round(expected * rng.uniform(0.9, 1.1))
                    unit_price = round(price * rng.uniform(0.97, 1.03), 2)
                    revenue = f"{units * unit_price:.2f}"
                    row = [
                        f"{year}-{month:02d}",
                        region,
                        product,
                        units,
                        f"{unit_price:.2f}",
                        revenue,
                    ]
                    writer.writerow(row)
    return out.getvalue().encode()
