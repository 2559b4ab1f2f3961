def lookup(cur, user_id):
    cur.execute("SELECT amount FROM t_order WHERE user_id = %s ORDER BY order_id LIMIT 10", (user_id,))
    cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (1, user_id, 3))
    cur.execute("SELECT name FROM t_config WHERE id = %s", (1,))


def documented():
    """SELECT * FROM t_order WHERE amount > 0 -- a docstring, not a statement."""
