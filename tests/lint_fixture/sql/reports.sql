-- reports run by hand
SELECT COUNT(*) FROM t_order;

SELECT order_id FROM t_order
WHERE user_id = 42;

SELECT order_id FROM t_order ORDER BY order_id LIMIT 20 OFFSET 50000;
INSERT INTO t_dict (id, name) VALUES (1, 'a');
SELECT order_id FROM t_order ORDER BY order_id LIMIT 10 OFFSET 2000;
SELECT order_id FROM t_order WHERE user_id = 1 FOR UPDATE SKIP LOCKED;
UPDATE t_order SET amount = amount + 1 WHERE user_id = 5 ORDER BY order_id LIMIT 1;
SELECT * FROM t_order o JOIN t_config c ON c.id = o.amount WHERE o.user_id = 3;
