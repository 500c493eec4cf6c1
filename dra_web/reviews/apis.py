"""REST endpoints of the review app (thin: parse, call a service or selector, serialise)."""

from __future__ import annotations

from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from dra_web.problems import problem
from dra_web.reviews import selectors, services
from dra_web.reviews.models import Comment, Review
from dra_web.runs.selectors import get_run


class CommentSerializer(serializers.ModelSerializer):
    author = serializers.SerializerMethodField()

    class Meta:
        model = Comment
        fields = ["id", "author", "body", "event", "created"]

    def get_author(self, obj) -> str | None:
        return obj.author.get_username() if obj.author else None


class ReviewSerializer(serializers.ModelSerializer):
    comments = CommentSerializer(many=True, read_only=True)
    runId = serializers.IntegerField(source="run_id", read_only=True)
    openedBy = serializers.SerializerMethodField()
    verdictBy = serializers.SerializerMethodField()

    class Meta:
        model = Review
        fields = [
            "id",
            "runId",
            "pod",
            "verdict",
            "verdictBy",
            "state",
            "openedBy",
            "created",
            "updated",
            "comments",
        ]

    def get_openedBy(self, obj) -> str | None:
        return obj.opened_by.get_username() if obj.opened_by else None

    def get_verdictBy(self, obj) -> str | None:
        return obj.verdict_by.get_username() if obj.verdict_by else None


class ReviewInputSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=[v for v, _ in Review.VERDICTS], required=False)
    state = serializers.ChoiceField(choices=[s for s, _ in Review.STATES], required=False)
    body = serializers.CharField(required=False, allow_blank=True)


class CommentInputSerializer(serializers.Serializer):
    body = serializers.CharField(allow_blank=False, max_length=services.MAX_COMMENT)


class RunReviewsApi(APIView):
    """GET /api/runs/{id}/reviews/: every review of a run, with its thread."""

    permission_classes = [IsAuthenticated]
    serializer_class = ReviewSerializer

    def get(self, request, run_id):
        run = get_run(run_id)
        reviews = run.reviews.prefetch_related("comments__author")
        return Response(ReviewSerializer(reviews, many=True).data)


class PodReviewApi(APIView):
    """GET/PATCH /api/runs/{id}/pods/{ns}/{name}/review/: one failed pod's review."""

    permission_classes = [IsAuthenticated]
    serializer_class = ReviewSerializer

    def get(self, request, run_id, namespace, name):
        review = selectors.review_for(get_run(run_id), f"{namespace}/{name}")
        if review is None:
            return problem(status.HTTP_404_NOT_FOUND, "no review yet")
        return Response(ReviewSerializer(review).data)

    def patch(self, request, run_id, namespace, name):
        run = get_run(run_id)
        pod = f"{namespace}/{name}"
        data = ReviewInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            if "verdict" in data.validated_data:
                services.set_verdict(
                    run,
                    pod,
                    request.user,
                    data.validated_data["verdict"],
                    data.validated_data.get("body", ""),
                )
            elif data.validated_data.get("body"):
                services.add_comment(run, pod, request.user, data.validated_data["body"])
            if "state" in data.validated_data:
                services.set_state(run, pod, request.user, data.validated_data["state"])
        except services.ReviewError as e:
            return problem(status.HTTP_400_BAD_REQUEST, str(e))
        return Response(ReviewSerializer(selectors.review_for(run, pod)).data)


class PodReviewCommentsApi(APIView):
    """POST /api/runs/{id}/pods/{ns}/{name}/review/comments/: add to the thread."""

    permission_classes = [IsAuthenticated]
    serializer_class = CommentSerializer

    def post(self, request, run_id, namespace, name):
        run = get_run(run_id)
        data = CommentInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            comment = services.add_comment(
                run, f"{namespace}/{name}", request.user, data.validated_data["body"]
            )
        except services.ReviewError as e:
            return problem(status.HTTP_400_BAD_REQUEST, str(e))
        return Response(CommentSerializer(comment).data, status=status.HTTP_201_CREATED)
