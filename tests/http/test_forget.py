"""Forget over the wire: a preview, the all guard, a receipt to undo it, an erasure without one."""

from __future__ import annotations

from tests.support.engines import ClientFactory

ITEMS = [
    {"type": "learning", "text": f"note {n}", "kind": "fact", "confidence": 0.5, "meta": {"tags": ["t"]}}
    for n in range(3)
]


async def test_preview_all_guard_receipt_and_restore(make_client: ClientFactory) -> None:
    async with make_client() as client:
        ids = [r["id"] for r in (await client.post("/v1/store_many", json={"items": ITEMS})).json()["receipts"]]
        preview = (await client.post("/v1/forget", json={"filter": {"tags_any": ["t"]}, "dry_run": True})).json()
        assert preview == {"forgotten": 0, "would_forget": 3, "first_ids": ids}
        everything = {"filter": {"reach": {"at": "root", "descendants": True}}}
        refused = await client.post("/v1/forget", json=everything)
        assert refused.status_code == 400 and '"all": true' in refused.json()["message"]
        report = (await client.post("/v1/forget", json={**everything, "all": True})).json()
        assert report["forgotten"] == 3 and report["receipt"].startswith("fgt_")
        assert (await client.post("/v1/list", json={"limit": 10})).json()["items"] == []
        restored = await client.post("/v1/restore", json={"receipt": report["receipt"]})
        assert restored.status_code == 200 and restored.json() == {"restored": 3}
        listed = (await client.post("/v1/list", json={"limit": 10})).json()["items"]
        assert [hit["id"] for hit in listed] == ids
        again = await client.post("/v1/restore", json={"receipt": report["receipt"]})
        assert again.status_code == 404 and again.json()["code"] == "not_found"
        erased = (await client.post("/v1/forget", json={"ids": ids[:1], "purge": True})).json()
        assert erased == {"forgotten": 1}


async def test_a_scoped_admin_restores_only_its_own(make_client: ClientFactory) -> None:
    async with make_client(api_keys="boot") as client:
        client.headers["authorization"] = "Bearer boot"
        alice = {**ITEMS[0], "meta": {"namespace": "user:alice"}}
        bob = {**ITEMS[1], "meta": {"namespace": "user:bob"}}
        await client.post("/v1/store_many", json={"items": [alice, bob]})
        both = (await client.post("/v1/forget", json={"filter": {"kinds": ["learning"]}, "all": True})).json()
        made = await client.post(
            "/v1/keys", json={"name": "a", "role": "admin", "reach": {"at": "user:alice", "inherit": False}}
        )
        key = {"authorization": f"Bearer {made.json()['secret']}"}
        refused = await client.post("/v1/restore", json={"receipt": both["receipt"]}, headers=key)
        assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
        assert (await client.post("/v1/restore", json={"receipt": both["receipt"]})).json() == {"restored": 2}
