# A realistic agent step: parse JSON, compute, print. Run by the lesson's executor.
import json
import statistics

DATA = json.loads("""
{"orders": [
  {"id": 1, "customer": "ada", "items": [{"sku": "A1", "qty": 2, "price": 9.5}, {"sku": "B2", "qty": 1, "price": 20.0}]},
  {"id": 2, "customer": "bob", "items": [{"sku": "A1", "qty": 5, "price": 9.5}]},
  {"id": 3, "customer": "ada", "items": [{"sku": "C3", "qty": 3, "price": 4.25}, {"sku": "B2", "qty": 2, "price": 20.0}]}
]}
""")

totals = {}
for order in DATA["orders"]:
    amount = sum(i["qty"] * i["price"] for i in order["items"])
    totals[order["customer"]] = totals.get(order["customer"], 0) + amount

print(json.dumps({"totals": totals, "mean": statistics.mean(totals.values())}, sort_keys=True))
