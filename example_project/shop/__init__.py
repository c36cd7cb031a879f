"""The example flash-sale shop: products, sales, orders, and the buy button."""
