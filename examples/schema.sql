-- The DDL template of examples/orders.yaml, written once against the logic tables.
-- `ddm ddl --config examples/orders.yaml examples/schema.sql` prints it for every physical
-- table (t_order_0_0 .. t_order_3_3, t_order_item_0_0 .. t_order_item_3_3) and every data
-- source (t_dict_region), and t_config once in ds_0; `--execute` creates them
-- (IF NOT EXISTS: running it again is harmless).
-- No AUTO_INCREMENT: 16 tables counting on their own would repeat ids.
-- order_id is a gene id (it carries the user's slot), item_id a snowflake id.

CREATE TABLE IF NOT EXISTS t_order (
  order_id    BIGINT        NOT NULL COMMENT 'gene id from the key generator',
  order_no    VARCHAR(32)   NOT NULL COMMENT 'business order number',
  user_id     BIGINT        NOT NULL COMMENT 'shard key',
  amount      DECIMAL(18,2) NOT NULL,
  status      TINYINT       NOT NULL DEFAULT 0,
  create_time DATETIME(3)   NOT NULL,
  update_time DATETIME(3)   NOT NULL,
  PRIMARY KEY (order_id),
  UNIQUE KEY uk_order_no (order_no),
  KEY idx_user_time (user_id, create_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS t_order_item (
  item_id     BIGINT        NOT NULL COMMENT 'snowflake id from the key generator',
  order_id    BIGINT        NOT NULL,
  user_id     BIGINT        NOT NULL COMMENT 'shard key, same as t_order',
  sku_id      BIGINT        NOT NULL,
  quantity    INT           NOT NULL,
  price       DECIMAL(18,2) NOT NULL,
  create_time DATETIME(3)   NOT NULL,
  PRIMARY KEY (item_id),
  KEY idx_order (order_id),
  KEY idx_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS t_dict_region (
  region_code VARCHAR(12)   NOT NULL,
  name        VARCHAR(64)   NOT NULL,
  parent_code VARCHAR(12)   NULL,
  level       TINYINT       NOT NULL,
  PRIMARY KEY (region_code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS t_config (
  config_key   VARCHAR(64)  NOT NULL,
  config_value VARCHAR(512) NOT NULL,
  update_time  DATETIME(3)  NOT NULL,
  PRIMARY KEY (config_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
