//! The Spin build's store: [`SqlStore`] over `spin:sqlite`, on the component's `default` database
//! (name it in the component's `sqlite_databases`).

use std::sync::Arc;

use hindsight_types::Store;

use crate::bindings::spin::sqlite::sqlite::{Connection, Error, Value};
use crate::front::OpenStore;
use crate::sql_store::{failed, Sql, SqlError, SqlStore, SqlValue};

struct SpinSqlite(Connection);

impl Sql for SpinSqlite {
    fn execute(&self, statement: &str, params: &[SqlValue]) -> Result<Vec<Vec<SqlValue>>, SqlError> {
        let params: Vec<Value> = params
            .iter()
            .map(|p| match p {
                SqlValue::Integer(i) => Value::Integer(*i),
                SqlValue::Text(t) => Value::Text(t.clone()),
                SqlValue::Blob(b) => Value::Blob(b.clone()),
                SqlValue::Null => Value::Null,
            })
            .collect();
        let result = self.0.execute(statement, &params).map_err(sql_error)?;
        Ok(result
            .rows
            .into_iter()
            .map(|row| {
                row.values
                    .into_iter()
                    .map(|v| match v {
                        Value::Integer(i) => SqlValue::Integer(i),
                        Value::Text(t) => SqlValue::Text(t),
                        Value::Blob(b) => SqlValue::Blob(b),
                        Value::Real(_) | Value::Null => SqlValue::Null,
                    })
                    .collect()
            })
            .collect())
    }
}

/// Spin reports SQLite's own errors as text: "database is locked" is another connection's
/// transaction, which a commit waits out.
fn sql_error(e: Error) -> SqlError {
    match e {
        Error::Io(m) if m.contains("locked") || m.contains("busy") => SqlError::Busy(m),
        Error::Io(m) => SqlError::Failed(m),
        Error::NoSuchDatabase => {
            SqlError::Failed("no database \"default\": name it in the component's sqlite_databases".into())
        }
        Error::AccessDenied => {
            SqlError::Failed("access to database \"default\" denied: name it in sqlite_databases".into())
        }
        Error::InvalidConnection => SqlError::Failed("the connection is not valid".into()),
        Error::DatabaseFull => SqlError::Failed("the database is full".into()),
    }
}

pub fn store() -> OpenStore {
    Box::new(|_data| {
        let conn = Connection::open("default").map_err(|e| failed("opening", sql_error(e)))?;
        let store: Arc<dyn Store> = Arc::new(SqlStore::open(SpinSqlite(conn))?);
        Ok(store)
    })
}
