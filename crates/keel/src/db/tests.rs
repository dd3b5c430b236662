//! Catalog decoding and corrupt nodes met through the public API.

use super::*;
use crate::catalog::{decode_root, CATALOG_ROOT};
use crate::page::PageId;
use proptest::prelude::*;

#[test]
fn catalog_entries_naming_no_table_root_are_corruption() {
    assert_eq!(
        decode_root(0, "t", &7u32.to_le_bytes()).unwrap(),
        PageId::new(0, 7)
    );
    for bad in [&0u32.to_le_bytes()[..], &1u32.to_le_bytes(), b"", b"12345"] {
        assert!(matches!(
            decode_root(0, "t", bad),
            Err(Error::Corruption(m)) if m.contains("`t`")
        ));
    }
}

proptest! {
    #[test]
    fn decode_root_never_panics(v in proptest::collection::vec(any::<u8>(), 0..9)) {
        if let Ok(id) = decode_root(3, "t", &v) {
            prop_assert_eq!(id.page_no.to_le_bytes().to_vec(), v);
            prop_assert!(id.page_no > CATALOG_ROOT);
        }
    }
}

#[test]
fn a_node_with_a_bad_slot_but_a_valid_checksum_is_a_corrupt_page_not_a_panic() {
    use crate::io::faulty::FaultyFs;
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let opts = Options {
        page_size: 4096,
        data_files: 1,
        ..Options::default()
    };
    let db = Db::open_with_fs(dir.path(), opts.clone(), Some(fs.clone())).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..20u32 {
        t.put(&i.to_be_bytes(), b"value").unwrap();
    }
    let root = t.tree.root();
    drop(t);
    db.close().unwrap();
    // Slot 0 of the root leaf points past the page; the checksum is
    // recomputed so that only the structure is wrong.
    let path = dir.path().join(crate::space::data_file_name(0));
    let (_, off) = crate::space::locate(root.page_no, 1, 4096);
    let mut page = fs.durable_image(&path).unwrap()[off as usize..off as usize + 4096].to_vec();
    crate::page::put_u16(&mut page, crate::btree::node::NODE_HEADER_END, 0xfff0);
    crate::page::stamp_checksum(&mut page);
    fs.write_durable(&path, off, &page).unwrap();
    let db = Db::open_with_fs(dir.path(), opts, Some(fs.clone())).unwrap();
    let t = db.table("t").unwrap();
    match t.get(&3u32.to_be_bytes()) {
        Err(Error::CorruptPage { page, reason, .. }) => {
            assert_eq!(page, root);
            assert!(reason.contains("checksum is valid"), "{reason}");
        }
        other => panic!("expected CorruptPage, got {other:?}"),
    }
}
