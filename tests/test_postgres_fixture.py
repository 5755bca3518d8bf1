"""The postgres fixtures give each test a real, private database."""

import psycopg


def test_postgres_url_is_a_real_server(postgres_url):
    with psycopg.connect(postgres_url) as conn:
        (dbname,) = conn.execute("SELECT current_database()").fetchone()
        assert dbname.startswith("t_")
        assert postgres_url.endswith("/" + dbname)

        conn.execute("CREATE TABLE probe (id integer PRIMARY KEY, note text NOT NULL)")
        conn.execute("INSERT INTO probe (id, note) VALUES (%s, %s)", (1, "hello"))
        conn.commit()
        assert conn.execute("SELECT id, note FROM probe").fetchall() == [(1, "hello")]

        (now,) = conn.execute("SELECT now()").fetchone()
        assert now.tzinfo is not None


def test_each_test_gets_a_fresh_database(postgres_url):
    with psycopg.connect(postgres_url) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'probe'"
        ).fetchone()
        assert count == 0


def test_database_is_dropped_afterwards(postgres_server_url):
    import pg

    name, url = pg.create_database(postgres_server_url)
    pg.drop_database(postgres_server_url, name)
    with psycopg.connect(postgres_server_url) as conn:
        rows = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchall()
    assert rows == []
