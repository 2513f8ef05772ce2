"""``one_of``: ``IN`` on SQLite, one array parameter on PostgreSQL, the same rows on both.

On PostgreSQL the statement's text must not depend on how many values are given (that is the
point: SQLAlchemy and psycopg cache it, PostgreSQL prepares it), and it must find exactly the
rows an ``IN`` list finds, for one value, for many, and for none.
"""

from __future__ import annotations

from sqlalchemy import Column, MetaData, String, Table, create_engine, insert, select

from mlcopilot.store.chunks import one_of

ROWS = [f"urn:li:dataset:(urn:li:dataPlatform:hive,t{n},PROD)" for n in range(1200)]


def test_the_same_rows_as_in_on_either_engine(store_url: str) -> None:
    engine = create_engine(store_url)
    table = Table("one_of_probe", MetaData(), Column("urn", String(200), primary_key=True))
    try:
        with engine.begin() as conn:
            table.create(conn)
            conn.execute(insert(table), [{"urn": u} for u in ROWS])
            wanted = [ROWS[0], ROWS[777], "urn:li:dataset:(nowhere)", *ROWS[1000:1200]]
            for values in ([], [ROWS[5]], wanted, ROWS):
                query = select(table.c.urn).where(one_of(conn, table.c.urn, values))
                found = sorted(conn.execute(query).scalars())
                expected = sorted(set(values) & set(ROWS))
                assert found == expected, len(values)
                in_list = select(table.c.urn).where(table.c.urn.in_(values))
                assert sorted(conn.execute(in_list).scalars()) == found
            table.drop(conn)
    finally:
        engine.dispose()


def test_one_text_for_any_number_of_values_on_postgresql(store_url: str) -> None:
    engine = create_engine(store_url)
    table = Table("one_of_text", MetaData(), Column("urn", String(200)))
    try:
        with engine.connect() as conn:
            texts = {
                str(select(table.c.urn).where(one_of(conn, table.c.urn, ROWS[:n])).compile(conn))
                for n in (1, 3, 500)
            }
            if conn.dialect.name == "postgresql":
                assert len(texts) == 1
                assert "= ANY (" in texts.pop()
            else:  # SQLite: an IN list (rendered when it runs)
                assert all(" IN (" in text for text in texts)
    finally:
        engine.dispose()
