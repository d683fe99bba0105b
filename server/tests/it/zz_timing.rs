use crate::support::*;
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn timing_probe() {
    for db in [Db::Sqlite, Db::Postgres] {
        let t0 = std::time::Instant::now();
        let (url, _dir) = fresh_url(db).await.unwrap();
        let t1 = t0.elapsed();
        let store = converge_server::store::connect(&url).await.unwrap();
        let t2 = t0.elapsed();
        store.close().await;
        let app = TestApp::spawn(db).await.unwrap();
        let t3 = t0.elapsed();
        let n = app.payment_count().await;
        let t4 = t0.elapsed();
        let u = app.db_url.clone();
        app.running.shutdown().await;
        let t5 = t0.elapsed();
        drop_database(&u).await;
        drop_database(&url).await;
        let t6 = t0.elapsed();
        eprintln!("{db:?}: fresh_url {t1:?} connect+migrate {t2:?} spawn {t3:?} count({n}) {t4:?} shutdown {t5:?} drop {t6:?}");
    }
}
