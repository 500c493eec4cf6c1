"""Team review of failed placements: verdicts, comment threads, stable links, the API."""

from __future__ import annotations

import pytest
from django.urls import reverse

from dra_web.reviews import selectors, services
from dra_web.reviews.models import Review


def review_url(run, pod="ml/infer-a100"):
    ns, name = pod.split("/")
    return reverse("pages:pod-review", args=[run.pk, ns, name])


def test_review_page_shows_the_failure_and_an_empty_thread(browser_client, run):
    url = review_url(run)
    assert url == f"/runs/{run.pk}/pods/ml/infer-a100/review/"
    html = browser_client.get(url).content.decode()
    assert "no instance type can satisfy the allocation" in html
    assert "0/1 nodes: 1 no free device" in html
    assert "No comment yet" in html
    # What the claim asked for, beside why it failed.
    assert "ResourceClaimTemplate one-a100" in html
    assert "&quot;A100&quot;" in html


def test_comment_and_verdict_appear_in_the_thread_with_author_and_time(
    browser_client, client, run, team
):
    maria, kenji = team
    url = review_url(run)
    response = browser_client.post(
        url, {"body": "The NodePool lists no A100 instance type.", "verdict": "needs-capacity"}
    )
    assert response.status_code == 302 and response["Location"] == f"{url}#thread"
    client.force_login(kenji)
    client.post(url, {"body": "Agreed; adding p4d.24xlarge.", "state": "resolved"})
    html = client.get(url).content.decode()
    assert "<strong>maria</strong> set the verdict to needs capacity" in html
    assert "The NodePool lists no A100 instance type." in html
    assert "<strong>kenji</strong> commented" in html
    assert "<strong>kenji</strong> resolved the review" in html
    assert "<time datetime=" in html
    review = selectors.review_for(run, "ml/infer-a100")
    assert review.verdict == Review.NEEDS_CAPACITY and review.state == Review.RESOLVED
    assert [c.author.username for c in review.comments.all()] == ["maria", "kenji", "kenji"]


def test_an_empty_post_is_refused(browser_client, run):
    response = browser_client.post(review_url(run), {"body": "  "})
    assert response.status_code == 400
    assert "Write a comment or choose a verdict." in response.content.decode()
    assert not Review.objects.exists()


def test_only_failed_pods_are_reviewed(browser_client, run, maria):
    with pytest.raises(services.ReviewError, match="not a failed pod"):
        services.add_comment(run, "ml/train-0", maria, "looks fine")
    html = browser_client.get(review_url(run, "ml/train-0")).content.decode()
    assert "reviews are for failed placements" in html
    assert browser_client.get(review_url(run, "ml/missing")).status_code == 404


def test_run_page_review_tab_shows_verdicts(browser_client, run, maria):
    services.set_verdict(run, "ml/notebook", maria, Review.BUG_IN_CONFIG, "typo in the selector")
    html = browser_client.get(reverse("pages:run", args=[run.pk])).content.decode()
    section = html[html.index('id="panel-review"') :]
    assert "bug in config" in section and ">open<" in section
    assert f'href="/runs/{run.pk}/pods/ml/notebook/review/"' in section


def test_review_api(run, team):
    from rest_framework.test import APIClient

    maria, _ = team
    api = APIClient()
    api.force_authenticate(maria)
    base = f"/api/runs/{run.pk}/pods/ml/notebook/review/"
    assert api.get(base).status_code == 404
    created = api.post(base + "comments/", {"body": "selector ends after =="}, format="json")
    assert created.status_code == 201 and created.data["author"] == "maria"
    patched = api.patch(base, {"verdict": "bug-in-config", "state": "resolved"}, format="json")
    assert patched.status_code == 200
    assert patched.data["verdict"] == "bug-in-config" and patched.data["state"] == "resolved"
    assert [c["event"] for c in patched.data["comments"]] == [
        "",
        "set the verdict to bug in config",
        "resolved the review",
    ]
    bad = api.patch(base, {"verdict": "cosmic-rays"}, format="json")
    assert bad.status_code == 400
    listing = api.get(f"/api/runs/{run.pk}/reviews/")
    assert [r["pod"] for r in listing.data] == ["ml/notebook"]
    assert (
        api.post(
            f"/api/runs/{run.pk}/pods/ml/train-0/review/comments/", {"body": "x"}, format="json"
        ).status_code
        == 400
    )
    anonymous = APIClient()
    assert anonymous.get(f"/api/runs/{run.pk}/reviews/").status_code in (401, 403)


def test_open_review_selectors(run, maria):
    assert not selectors.has_open_review(run)
    services.add_comment(run, "ml/infer-a100", maria, "why?")
    assert selectors.run_ids_with_open_review() == {run.pk}
    assert selectors.has_open_review(run)
    services.set_state(run, "ml/infer-a100", maria, Review.RESOLVED)
    assert selectors.run_ids_with_open_review() == set()
    assert not selectors.has_open_review(run)
    from dra_web.runs.selectors import run_list

    assert list(run_list(has_open_review=True)) == []
