from django.urls import path

from . import views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("c/<str:cluster>/", views.cluster, name="cluster"),
    path("c/<str:cluster>/recommendations.csv", views.cluster_csv, name="cluster_csv"),
    path("c/<str:cluster>/node/<str:node>/", views.node, name="node"),
    path("c/<str:cluster>/lab-verify/", views.lab_verify, name="lab_verify"),
    path("c/<str:cluster>/ns/<str:namespace>/", views.namespace, name="namespace"),
    path("c/<str:cluster>/ns/<str:namespace>/recommendations.csv", views.namespace_csv, name="namespace_csv"),
    path("c/<str:cluster>/ns/<str:namespace>/pod/<str:pod>/", views.pod, name="pod"),
]
