"""The throw-away stacks' broker DBs on the machine's real Redis: two stacks started together never
share one (the claim is a ``SET NX`` of a marker key, not a look at the DB's size)."""

from __future__ import annotations

import pytest
import redis
from stack.stack import REDIS_CLAIM_KEY, claim_free_redis_db

pytestmark = pytest.mark.integration


def test_two_claims_in_a_row_get_different_empty_dbs():
    claimed = []
    try:
        claimed.append(claim_free_redis_db("test-claim-a"))
        claimed.append(claim_free_redis_db("test-claim-b"))
        assert claimed[0] != claimed[1]
        owners = [redis.Redis(db=number).get(REDIS_CLAIM_KEY) for number in claimed]
        assert owners == [b"test-claim-a", b"test-claim-b"]
        assert all(0 < redis.Redis(db=number).ttl(REDIS_CLAIM_KEY) <= 86_400 for number in claimed)
    finally:
        for number in claimed:
            redis.Redis(db=number).delete(REDIS_CLAIM_KEY)
