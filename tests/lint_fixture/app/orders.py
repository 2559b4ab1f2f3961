"""A fixture application for ddm lint (read, never run). SELECT * FROM t_order here is a docstring."""


def by_user(cur, user_id):
    cur.execute("SELECT order_id, amount FROM t_order WHERE user_id = %s", (user_id,))


def everything(cur):
    cur.execute("SELECT order_id FROM t_order WHERE amount > %s", (10,))


def move(cur):
    cur.execute(
        "UPDATE t_order SET user_id = %s WHERE user_id = %s",
        (2, 1),
    )


def close_many(cur):
    cur.execute("UPDATE t_order SET amount = 0 WHERE user_id IN (1, 2, 3, 4, 5, 6, 7, 8)")


PAGE = "SELECT order_id FROM t_order ORDER BY order_id LIMIT 20 OFFSET %s"
GREETING = "Select a colour"
DICT = "SELECT name FROM t_dict WHERE id = 1"


def with_sqlalchemy(conn, text):
    conn.execute(text("DELETE FROM t_order WHERE amount = :amount"))
    conn.execute(text("SELECT * FROM t_order WHERE user_id = :uid"))
    conn.execute("SELECT 1 FROM other_table")


def page(cur, size, offset):
    cur.execute("SELECT order_id FROM t_order ORDER BY order_id LIMIT %s OFFSET %s", (size, offset))
