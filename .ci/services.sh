#!/usr/bin/env bash
# The machine's own services, as the tests need them: started when they do not answer, with the
# commands the machine starts them with (a MariaDB restarted by hand during a session is gone when
# the session ends, and a run after it found nothing on 3306), then MariaDB's max_connections raised.
set -uo pipefail

wait_for() {  # wait_for NAME COMMAND...: up to 60 s for COMMAND to succeed
	local name=$1; shift
	for _ in $(seq 120); do "$@" > /dev/null 2>&1 && return 0; sleep 0.5; done
	echo "services: $name did not come up" >&2; return 1
}

mariadb_up() { mariadb -uroot -h127.0.0.1 -N -e 'SELECT 1'; }
if ! mariadb_up > /dev/null 2>&1 && [ -x /usr/sbin/mariadbd ]; then
	echo "services: MariaDB on 127.0.0.1:3306 did not answer; starting it"
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
	wait_for MariaDB mariadb_up
fi

if ! redis-cli -h 127.0.0.1 ping > /dev/null 2>&1 && command -v redis-server > /dev/null; then
	echo "services: Redis on 127.0.0.1:6379 did not answer; starting it"
	redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
		--dir /var/lib/redis --logfile /var/log/redis/ci.log
	wait_for Redis redis-cli -h 127.0.0.1 ping
fi

if ! pg_isready -h 127.0.0.1 -q 2>/dev/null && [ -d /etc/postgresql ]; then
	echo "services: PostgreSQL on 127.0.0.1:5432 did not answer; starting it"
	pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
	wait_for PostgreSQL pg_isready -h 127.0.0.1 -q
fi

# Four workers' pools, proxies and private servers' clients reach ~140 connections to the shared
# MariaDB at once, where its default max_connections is 151: raised to 400 when it is lower (SET GLOBAL:
# until the server restarts; nothing else on it changes).
if [ "$(mariadb -uroot -h127.0.0.1 -N -e 'SELECT @@max_connections < 400' 2>/dev/null)" = 1 ]; then
	echo "services: max_connections raised to 400 on 127.0.0.1:3306"
	mariadb -uroot -h127.0.0.1 -e 'SET GLOBAL max_connections = 400'
fi
exit 0
