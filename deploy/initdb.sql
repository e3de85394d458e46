-- Dagster and the state store each get a database: both have a `runs` table.
CREATE DATABASE dagster;
CREATE DATABASE freshness;
